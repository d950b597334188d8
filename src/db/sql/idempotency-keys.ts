import type { Queryable } from '../db.ts';

/** A recorded key: in flight while `statusCode` is null, else completed with its answer. */
export interface IdempotencyRow {
  request_hash: string;
  owner: string;
  locked_until: Date | null;
  status_code: number | null;
  response_headers: Record<string, string> | null;
  response_body: string | null;
}

export interface Reservation {
  organizationId: string;
  key: string;
  requestHash: string;
  owner: string;
  /** The clock's statement time (null: the database's own now). */
  now: Date | null;
  leaseMs: number;
  retentionMs: number;
}

/**
 * Takes the key for this request: a new key, a key older than the retention, or an in-flight
 * key whose lease ran out (its process died) becomes this request's, in flight. Returns whether
 * it did; when not, the existing row says why (findIdempotencyKey).
 */
export async function reserveIdempotencyKey(db: Queryable, r: Reservation): Promise<boolean> {
  const rows = await db.query<{ owner: string }>(
    `WITH t AS (SELECT coalesce($4::timestamptz, now()) AS now)
     INSERT INTO idempotency_keys (organization_id, key, request_hash, created_at, locked_until, owner)
     SELECT $1, $2, $3, t.now, t.now + make_interval(secs => $5::double precision / 1000), $6 FROM t
     ON CONFLICT (organization_id, key) DO UPDATE SET
       request_hash = EXCLUDED.request_hash, created_at = EXCLUDED.created_at,
       locked_until = EXCLUDED.locked_until, owner = EXCLUDED.owner,
       status_code = NULL, response_headers = NULL, response_body = NULL
     WHERE idempotency_keys.created_at <= EXCLUDED.created_at - make_interval(secs => $7::double precision / 1000)
        OR (idempotency_keys.status_code IS NULL AND idempotency_keys.locked_until <= EXCLUDED.created_at)
     RETURNING owner`,
    [r.organizationId, r.key, r.requestHash, r.now, r.leaseMs, r.owner, r.retentionMs],
  );
  return rows[0]?.owner === r.owner;
}

export async function findIdempotencyKey(
  db: Queryable,
  organizationId: string,
  key: string,
): Promise<IdempotencyRow | undefined> {
  const [row] = await db.query<IdempotencyRow>(
    `SELECT request_hash, owner, locked_until, status_code, response_headers, response_body
       FROM idempotency_keys WHERE organization_id = $1 AND key = $2`,
    [organizationId, key],
  );
  return row;
}

/** Records the answer of the request holding the key; a no-op if it lost the key meanwhile. */
export async function completeIdempotencyKey(
  db: Queryable,
  organizationId: string,
  key: string,
  owner: string,
  answer: { status: number; headers: Record<string, string>; body: string },
): Promise<void> {
  await db.query(
    `UPDATE idempotency_keys
        SET status_code = $4, response_headers = $5::jsonb, response_body = $6, locked_until = NULL
      WHERE organization_id = $1 AND key = $2 AND owner = $3 AND status_code IS NULL`,
    [organizationId, key, owner, answer.status, JSON.stringify(answer.headers), answer.body],
  );
}

/** Lets the key go (an answer not kept): a retry with it runs afresh. */
export async function releaseIdempotencyKey(
  db: Queryable,
  organizationId: string,
  key: string,
  owner: string,
): Promise<void> {
  await db.query(
    `DELETE FROM idempotency_keys
      WHERE organization_id = $1 AND key = $2 AND owner = $3 AND status_code IS NULL`,
    [organizationId, key, owner],
  );
}

/** Deletes keys recorded more than `retentionMs` before `now` (null: the database's now). */
export async function pruneIdempotencyKeys(
  db: Queryable,
  now: Date | null,
  retentionMs: number,
): Promise<number> {
  const rows = await db.query<{ n: number }>(
    `WITH gone AS (
       DELETE FROM idempotency_keys
        WHERE created_at <= coalesce($1::timestamptz, now()) - make_interval(secs => $2::double precision / 1000)
        RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [now, retentionMs],
  );
  return rows[0]?.n ?? 0;
}

/** How many keys the organization holds (expired ones until the next pruning included). */
export async function countIdempotencyKeys(db: Queryable, organizationId: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM idempotency_keys WHERE organization_id = $1',
    [organizationId],
  );
  return row?.n ?? 0;
}
