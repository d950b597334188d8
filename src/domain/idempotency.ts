import { randomUUID } from 'node:crypto';
import {
  completeIdempotencyKey,
  countIdempotencyKeys,
  findIdempotencyKey,
  releaseIdempotencyKey,
  reserveIdempotencyKey,
} from '../db/sql/idempotency-keys.ts';
import { canonicalJson, sha256Hex } from '../lib/canonical-json.ts';
import { AppError, errors } from '../lib/errors.ts';
import type { Deps } from './deps.ts';

/** How long a key and its answer are kept (and replayed). */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;
/**
 * How long a reservation holds its key while its request runs. A reservation whose process
 * died is taken over by the next request with the key after this. Handlers answer well within
 * it (the slowest, a source's connection test, is bounded far below).
 */
export const IDEMPOTENCY_LEASE_MS = 2 * 60 * 1000;
/** Key length in characters (printable ASCII only). */
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;
/** Answers larger than this are not kept: the key is let go, and a retry runs afresh. */
export const IDEMPOTENCY_MAX_ANSWER_BYTES = 2 * 1024 * 1024;
/** Keys one organization may hold within the retention period. */
export const IDEMPOTENCY_MAX_KEYS_PER_ORGANIZATION = 10_000;
/** Response headers kept with an answer and replayed with it. */
const KEPT_HEADERS = ['content-type', 'location', 'etag'];

const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/** The header's value checked: 1 to 255 printable ASCII characters, else a 400. */
export function parseIdempotencyKey(value: string | string[]): string {
  const key = Array.isArray(value) ? value.join(', ') : value;
  if (key.length < 1 || key.length > IDEMPOTENCY_KEY_MAX_LENGTH || !PRINTABLE_ASCII.test(key)) {
    throw errors.validation('Idempotency-Key must be 1 to 255 printable ASCII characters', [
      { path: '/headers/idempotency-key', message: 'must be 1 to 255 printable ASCII characters' },
    ]);
  }
  return key;
}

/** What a key's request is compared by: its method, path with query, and body as canonical JSON. */
export function requestFingerprint(method: string, url: string, body: unknown): string {
  return sha256Hex(`${method}\n${url}\n${body === undefined ? '' : canonicalJson(body)}`);
}

export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The request may run (it holds the key), or gets the first request's answer again. */
export type KeyClaim = { run: true; owner: string } | { run: false; answer: StoredAnswer };

/**
 * Claims `key` of the organization for a request with `fingerprint`: the first request runs;
 * a later one with the same fingerprint gets the first's answer, or a 409 while the first is
 * still running; one with another fingerprint is a 422.
 */
export async function claimIdempotencyKey(
  deps: Pick<Deps, 'db' | 'clock'>,
  organizationId: string,
  key: string,
  fingerprint: string,
): Promise<KeyClaim> {
  const owner = randomUUID();
  // A row can vanish between the two statements (pruned, or let go after a 5xx): look again.
  for (let attempt = 0; attempt < 3; attempt++) {
    const existing = await findIdempotencyKey(deps.db, organizationId, key);
    if (
      !existing &&
      (await countIdempotencyKeys(deps.db, organizationId)) >= IDEMPOTENCY_MAX_KEYS_PER_ORGANIZATION
    ) {
      throw new AppError('rate_limited', 'Too many idempotency keys in the last 24 hours; retry later', {
        headers: { 'retry-after': '3600' },
      });
    }
    const reserved = await reserveIdempotencyKey(deps.db, {
      organizationId,
      key,
      requestHash: fingerprint,
      owner,
      now: deps.clock.statementNow(),
      leaseMs: IDEMPOTENCY_LEASE_MS,
      retentionMs: IDEMPOTENCY_RETENTION_MS,
    });
    if (reserved) return { run: true, owner };
    const row = await findIdempotencyKey(deps.db, organizationId, key);
    if (!row) continue;
    if (row.request_hash !== fingerprint) {
      throw new AppError(
        'idempotency_key_reused',
        'This Idempotency-Key was used with a different request in the last 24 hours',
      );
    }
    if (row.status_code === null || row.response_body === null) {
      throw errors.conflict('A request with this Idempotency-Key is still in progress; retry shortly');
    }
    return {
      run: false,
      answer: { status: row.status_code, headers: row.response_headers ?? {}, body: row.response_body },
    };
  }
  throw errors.conflict('A request with this Idempotency-Key is still in progress; retry shortly');
}

/**
 * Keeps the answer of the request holding the key. A 5xx is not kept (the key is let go: a
 * retry runs again), nor is an answer above IDEMPOTENCY_MAX_ANSWER_BYTES.
 */
export async function finishIdempotencyKey(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  key: string,
  owner: string,
  answer: { status: number; headers: Record<string, unknown>; body: string },
): Promise<void> {
  if (answer.status >= 500 || Buffer.byteLength(answer.body) > IDEMPOTENCY_MAX_ANSWER_BYTES) {
    await releaseIdempotencyKey(deps.db, organizationId, key, owner);
    return;
  }
  const headers: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const value = answer.headers[name];
    if (typeof value === 'string' || typeof value === 'number') headers[name] = String(value);
  }
  await completeIdempotencyKey(deps.db, organizationId, key, owner, { ...answer, headers });
}
