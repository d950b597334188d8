import type { Queryable } from '../db/db.ts';
import {
  type ApiKeyRow,
  authenticateAndCount,
  insertApiKey,
  listApiKeys,
  revokeApiKey,
} from '../db/sql/api-keys.ts';
import { newId } from '../lib/ids.ts';
import { displayPrefix, generateApiKey, hashApiKey, isWellFormedApiKey } from './api-key-format.ts';
import type { Deps } from './deps.ts';
import { effectiveLimits, type Plan, type PlanLimits, UNAUTHENTICATED_RATE_LIMIT } from './plans.ts';
import { type RateState, rateState, windowStart } from './rate-limit.ts';

export interface ApiKeyView {
  id: string;
  organizationId: string;
  name: string;
  /** The first characters of the key, to tell keys apart; never the whole value. */
  prefix: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
  /** The user who created the key, when a user did (and still exists). */
  createdBy?: { id: string; email: string };
}

export function apiKeyView(row: ApiKeyRow): ApiKeyView {
  return {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    prefix: row.display_prefix,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at?.toISOString() ?? null,
    revokedAt: row.revoked_at?.toISOString() ?? null,
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
    ...(row.created_by_user_id !== null &&
      row.created_by_email !== null && {
        createdBy: { id: row.created_by_user_id, email: row.created_by_email },
      }),
  };
}

/** Creates a key; the returned `apiKey` value exists nowhere else and is shown once. */
export async function createApiKey(
  deps: Pick<Deps, 'clock'>,
  db: Queryable,
  input: { organizationId: string; name: string; expiresAt?: Date | null; createdByUserId?: string | null },
): Promise<{ key: ApiKeyView; apiKey: string }> {
  const apiKey = generateApiKey();
  const row = await insertApiKey(db, {
    id: newId(),
    organizationId: input.organizationId,
    name: input.name,
    keyHash: hashApiKey(apiKey),
    displayPrefix: displayPrefix(apiKey),
    expiresAt: input.expiresAt ?? null,
    createdByUserId: input.createdByUserId ?? null,
    now: deps.clock.now(),
  });
  return { key: apiKeyView(row), apiKey };
}

export async function listOrganizationKeys(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
): Promise<ApiKeyView[]> {
  return (await listApiKeys(deps.db, organizationId)).map(apiKeyView);
}

export async function revokeKey(
  deps: Pick<Deps, 'db' | 'clock'>,
  keyId: string,
): Promise<ApiKeyView | undefined> {
  const row = await revokeApiKey(deps.db, keyId, deps.clock.now());
  return row && apiKeyView(row);
}

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

/**
 * Authenticates an `Authorization` header value and counts the request against the right
 * rate-limit window: the organization's when the key is usable, the client address's
 * otherwise. Malformed keys cost no key lookup.
 */
export async function authenticate(
  deps: Pick<Deps, 'db' | 'clock'>,
  authorization: string | undefined,
  clientAddress: string,
): Promise<AuthOutcome> {
  const now = deps.clock.now();
  const token = bearerToken(authorization);
  const wellFormed = token !== undefined && isWellFormedApiKey(token);
  const row = await authenticateAndCount(deps.db, {
    keyHash: wellFormed ? hashApiKey(token) : null,
    addressBucket: `addr:${clientAddress}`,
    windowStart: windowStart(now),
    now,
  });
  const anonymousRate = () => rateState(now, UNAUTHENTICATED_RATE_LIMIT, row.hits);
  if (token === undefined) return { ok: false, reason: 'missing', rate: anonymousRate() };
  if (!wellFormed) return { ok: false, reason: 'malformed', rate: anonymousRate() };
  if (!row.key_id || !row.organization_id || !row.plan)
    return { ok: false, reason: 'unknown', rate: anonymousRate() };
  if (row.revoked_at) return { ok: false, reason: 'revoked', rate: anonymousRate() };
  if (row.expires_at && row.expires_at <= now) return { ok: false, reason: 'expired', rate: anonymousRate() };
  const limits = effectiveLimits(row.plan, row.limit_overrides ?? {});
  return {
    ok: true,
    principal: { organizationId: row.organization_id, keyId: row.key_id, plan: row.plan, limits },
    rate: rateState(now, limits.rateLimitPerMinute, row.hits),
  };
}

/** The token of a `Bearer` authorization header (scheme case-insensitive), else undefined. */
function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer[ ]+(\S+)[ ]*$/i.exec(header);
  return m?.[1];
}
