import { type KeyLookupRow, touchApiKey } from '../db/sql/api-keys.ts';
import { addHits } from '../db/sql/rate-limits.ts';
import { hashApiKey, isWellFormedApiKey } from './api-key-format.ts';
import type { Deps } from './deps.ts';
import { effectiveLimits, type Plan, type PlanLimits, UNAUTHENTICATED_RATE_LIMIT } from './plans.ts';
import { RateCounter } from './rate-counter.ts';
import type { RateState } from './rate-limit.ts';

export interface Principal {
  organizationId: string;
  keyId: string;
  plan: Plan;
  limits: PlanLimits;
}

export type AuthFailure = 'missing' | 'malformed' | 'unknown' | 'revoked' | 'expired';

export type AuthOutcome =
  | { ok: true; principal: Principal; rate: RateState }
  | { ok: false; reason: AuthFailure; rate: RateState };

/** `lastUsedAt` is refreshed at most this often per key: it tells "in use", not a request log. */
const TOUCH_EVERY_MS = 60_000;

/**
 * Authenticates API-key requests and counts them against the right rate-limit window: the
 * organization's when the key is usable, the client address's otherwise. Keys come from the
 * principal cache and counting from per-process claims (see RateCounter), so most requests
 * cost no database round trip at all.
 */
export class Authenticator {
  readonly #deps: Pick<Deps, 'db' | 'clock' | 'principals'>;
  readonly #rates: RateCounter;
  /** When this process last refreshed each key's lastUsedAt (ms since epoch). */
  readonly #touched = new Map<string, number>();
  readonly #principals = new WeakMap<KeyLookupRow, Principal>();

  constructor(deps: Pick<Deps, 'db' | 'clock' | 'principals'>) {
    this.#deps = deps;
    this.#rates = new RateCounter((bucket, window, n) => addHits(deps.db, bucket, window, n));
  }

  /**
   * The outcome, at once (no promise) when this process holds all it depends on: the key
   * remembered and usable, its organization's allowance for the current window (or the window
   * known to be exhausted), and no lastUsedAt refresh due. Most requests of a busy key are
   * decided so; the others (a key to look up, an allowance to claim, a refusal to count) get a
   * promise. `clientAddress` is asked for only when the request is refused: working it out
   * through the trusted proxies' X-Forwarded-For costs something on every request that would
   * otherwise pay.
   */
  authenticate(
    authorization: string | undefined,
    clientAddress: string | (() => string),
  ): AuthOutcome | Promise<AuthOutcome> {
    const now = this.#deps.clock.now();
    const token = bearerToken(authorization);
    if (token === undefined) return this.#refuse('missing', clientAddress, now);
    // Malformed keys (bad shape or checksum) cost no key lookup.
    if (!isWellFormedApiKey(token)) return this.#refuse('malformed', clientAddress, now);
    const keyHash = hashApiKey(token);
    const known = this.#deps.principals.peek(keyHash);
    if (known && usable(known, now) && !this.#touchDue(known, now)) {
      const principal = this.#principalOf(known);
      const rate = this.#rates.hitNow(
        `org:${known.organization_id}`,
        principal.limits.rateLimitPerMinute,
        now,
      );
      if (rate) return { ok: true, principal, rate };
    }
    return this.#lookUp(keyHash, clientAddress, now);
  }

  /** What authenticate() cannot decide at once: nothing has been counted yet. */
  async #lookUp(keyHash: string, clientAddress: string | (() => string), now: Date): Promise<AuthOutcome> {
    const key = await this.#deps.principals.lookup(keyHash);
    if (!key) return this.#refuse('unknown', clientAddress, now);
    if (key.revoked_at) return this.#refuse('revoked', clientAddress, now);
    if (key.expires_at && key.expires_at <= now) return this.#refuse('expired', clientAddress, now);

    const principal = this.#principalOf(key);
    const rate = await this.#rates.hit(
      `org:${key.organization_id}`,
      principal.limits.rateLimitPerMinute,
      now,
    );
    if (!rate.exceeded && this.#touchDue(key, now)) await this.#touch(key.key_id, now);
    return { ok: true, principal, rate };
  }

  /** A refusal, counted in the client address's bucket. */
  async #refuse(
    reason: AuthFailure,
    clientAddress: string | (() => string),
    now: Date,
  ): Promise<AuthOutcome> {
    const address = typeof clientAddress === 'string' ? clientAddress : clientAddress();
    return { ok: false, reason, rate: await this.countAddress(address, now) };
  }

  /**
   * Counts a request in its client address's bucket, the one of requests without a usable key
   * (refused keys, and the public API description, which takes none).
   */
  countAddress(clientAddress: string, now: Date = this.#deps.clock.now()): Promise<RateState> {
    return this.#rates.hit(`addr:${clientAddress}`, UNAUTHENTICATED_RATE_LIMIT, now);
  }

  /** Whether this request should refresh the key's lastUsedAt (at most once a minute per key). */
  #touchDue(key: KeyLookupRow, now: Date): boolean {
    const last = Math.max(this.#touched.get(key.key_id) ?? 0, key.last_used_at?.getTime() ?? 0);
    return now.getTime() - last >= TOUCH_EVERY_MS;
  }

  async #touch(keyId: string, now: Date): Promise<void> {
    this.#touched.set(keyId, now.getTime());
    await touchApiKey(this.#deps.db, keyId, now);
  }

  /**
   * The principal of a remembered key: the same object for as long as the principal cache keeps
   * the row (it holds a new row after any change), so its limits are worked out once.
   */
  #principalOf(key: KeyLookupRow): Principal {
    let principal = this.#principals.get(key);
    if (!principal) {
      principal = {
        organizationId: key.organization_id,
        keyId: key.key_id,
        plan: key.plan,
        limits: effectiveLimits(key.plan, key.limit_overrides),
      };
      this.#principals.set(key, principal);
    }
    return principal;
  }
}

function usable(key: KeyLookupRow, now: Date): boolean {
  return !key.revoked_at && !(key.expires_at && key.expires_at <= now);
}

/** The token of a `Bearer` authorization header (scheme case-insensitive), else undefined. */
function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer[ ]+(\S+)[ ]*$/i.exec(header);
  return m?.[1];
}
