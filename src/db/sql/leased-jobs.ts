import type { Queryable } from '../db.ts';

/**
 * The one contract of every job table (runs, deliveries, meter reports): a job is taken with a
 * lease (lease_owner, lease_expires_at); its holder renews the lease while it works; a job whose
 * lease expired (its holder died) is recovered for another; a holder that stops early releases
 * it; and the job is settled (its outcome written) only while the lease is still the writer's,
 * so a holder presumed dead can never overwrite the outcome of the one that took over.
 *
 * A table describes itself as data: the SQL fragments below are constants written in code, never
 * input. A LeasedTable is what renewing, recovering, releasing and settling need; a
 * ClaimableTable adds what the generic claim needs. Runs are a LeasedTable only: they keep their
 * own claim query (the per-organization fair claim, run-queue.ts) and use the rest of the contract.
 */
export interface LeasedTable {
  /** The table; its key is `id` (uuid) and it has lease_owner and lease_expires_at columns. */
  table: string;
  /** A job that is held (claimed and not settled). */
  held: string;
  /** Assignments when a job is given back: released by its holder or recovered from a dead one. */
  onReturn: string;
  /** Further assignments when a holder releases a job untried (the attempt not counted). */
  onRelease?: string;
}

/** A leased-job table whose jobs are taken by the generic claim (claimLeased). */
export interface ClaimableTable extends LeasedTable {
  /** A job that waits to be claimed, `$now` standing for the claim's time. */
  claimable: string;
  /** The order claims take jobs in. */
  order: string;
  /** Further assignments when a job is claimed (`$now` as above), e.g. a status or attempt count. */
  onClaim?: string;
}

/** `$now` in a table's fragments (no `g` flag: `test` keeps no state between calls). */
const NOW_MARK = /\$now/;
const NOW = /\$now/g;
const sets = (...parts: (string | undefined)[]) => parts.filter(Boolean).join(', ');
const leaseUntil = (now: string, ms: string) =>
  `${now}::timestamptz + make_interval(secs => ${ms}::double precision / 1000)`;

/** Claims up to `limit` claimable jobs for `owner`, in the table's order (FOR UPDATE SKIP LOCKED). */
export function claimLeased<Row>(
  tx: Queryable,
  t: ClaimableTable,
  o: { owner: string; now: Date; leaseMs: number; limit: number },
): Promise<Row[]> {
  return tx.query<Row>(
    `WITH picked AS (
       SELECT id FROM ${t.table}
        WHERE ${t.claimable.replace(NOW, '$2')}
        ORDER BY ${t.order}
        LIMIT $4
        FOR UPDATE SKIP LOCKED
     )
     UPDATE ${t.table} j SET ${sets(`lease_owner = $1`, `lease_expires_at = ${leaseUntil('$2', '$3')}`, t.onClaim?.replace(NOW, '$2'))}
       FROM picked WHERE j.id = picked.id
     RETURNING j.*`,
    [o.owner, o.now, o.leaseMs, o.limit],
  );
}

/**
 * Renews the leases `owner` holds on `ids`; returns the ids it still holds (a missing one was lost).
 *
 * The rows are locked in id order first, as every statement that takes several of them does
 * (a worker's write batch, a usage write): an UPDATE alone takes them in whatever order its scan
 * meets them, and against a batch holding some of them it deadlocked (PostgreSQL's log: 17 times
 * in about 40 minutes of the ledger chaos test, 4 at once), a renewal failing after the deadlock
 * timeout (1 s by default), which with a short lease let it expire under a run still executing.
 */
export async function renewLeased(
  db: Queryable,
  t: LeasedTable,
  o: { owner: string; ids: string[]; now: Date; leaseMs: number },
): Promise<Set<string>> {
  if (!o.ids.length) return new Set();
  const rows = await db.query<{ id: string }>(
    `WITH held AS (
       SELECT id FROM ${t.table} WHERE id = ANY($1::uuid[]) AND lease_owner = $2 AND ${t.held}
        ORDER BY id FOR NO KEY UPDATE
     )
     UPDATE ${t.table} j SET lease_expires_at = ${leaseUntil('$3', '$4')}
       FROM held WHERE j.id = held.id
     RETURNING j.id`,
    [o.ids, o.owner, o.now, o.leaseMs],
  );
  return new Set(rows.map((r) => r.id));
}

/** Gives back the held jobs whose lease expired before `now` (their holder died); returns their ids. */
export async function recoverExpiredLeased(db: Queryable, t: LeasedTable, now: Date): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `UPDATE ${t.table} SET ${sets('lease_owner = NULL', 'lease_expires_at = NULL', t.onReturn.replace(NOW, '$1'))}
      WHERE ${t.held} AND lease_expires_at < $1
      RETURNING id`,
    [now],
  );
  return rows.map((r) => r.id);
}

/** Gives back a job `owner` holds, untried (shutdown); returns whether it still held it. */
export async function releaseLeased(
  db: Queryable,
  t: LeasedTable,
  o: { id: string; owner: string; now?: Date },
): Promise<boolean> {
  // A parameter no statement text uses has no type, which PostgreSQL refuses: `now` is passed
  // only to a table whose return assignments use it.
  const usesNow = NOW_MARK.test(t.onReturn);
  const rows = await db.query(
    `UPDATE ${t.table} SET ${sets('lease_owner = NULL', 'lease_expires_at = NULL', t.onReturn.replace(NOW, '$3'), t.onRelease)}
      WHERE id = $1 AND lease_owner = $2 AND ${t.held}
      RETURNING id`,
    usesNow ? [o.id, o.owner, o.now] : [o.id, o.owner],
  );
  return rows.length > 0;
}

/**
 * Writes a job's outcome, only while `owner` holds it: `assignments` (with `$3`, `$4`, ... for
 * `values`) and the lease cleared. Returns whether it did; false means the lease was lost.
 */
export async function settleLeased(
  db: Queryable,
  t: LeasedTable,
  o: { id: string; owner: string; assignments: string; values: unknown[] },
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE ${t.table} SET ${sets(o.assignments, 'lease_owner = NULL', 'lease_expires_at = NULL')}
      WHERE id = $1 AND lease_owner = $2 AND ${t.held}
      RETURNING id`,
    [o.id, o.owner, ...o.values],
  );
  return rows.length > 0;
}
