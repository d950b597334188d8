import type { Queryable } from '../db.ts';

/** Runs deleted by one statement, at most: one short transaction, its cascade included. */
export const RUN_PRUNE_BATCH = 1000;

// Walks the organizations and, for each, its runs older than the cutoff through
// runs_org_created_idx (organization_id, created_at DESC, id): an organization without such
// runs costs one index probe, and no index on runs (created_at) has to be kept up by every
// run's insert for this once-a-minute job. Only ended runs whose deliveries are done go
// (a run still pending, running or delivering is never pulled from under its worker); their
// deliveries and attempts go with them (ON DELETE CASCADE). The usage ledger has no foreign
// key to runs and stays: usage, billing and the statistics' run figures never drop.
const PRUNE_RUNS = `
  WITH doomed AS (
    SELECT x.id
      FROM organizations o
      CROSS JOIN LATERAL (
        SELECT r.id FROM runs r
         WHERE r.organization_id = o.id
           AND r.created_at < coalesce($1::timestamptz, now()) - make_interval(days => $2::int)
           AND r.status IN ('completed', 'failed')
           AND r.delivery_status IS DISTINCT FROM 'pending'
         ORDER BY r.created_at DESC, r.id DESC
         LIMIT $3::int
           -- Api processes prune at once: each passes over the rows another is deleting,
           -- instead of waiting for them (or, taking them in another order, deadlocking).
           FOR UPDATE SKIP LOCKED) x
     LIMIT $3::int
  ), gone AS (
    DELETE FROM runs r USING doomed d WHERE r.id = d.id RETURNING 1
  )
  SELECT count(*)::int AS n FROM gone`;

/**
 * Deletes up to `limit` ended runs created more than `retentionDays` days before `now` (null:
 * the database's now), with their deliveries. Returns how many went; fewer than `limit` means
 * none are left.
 */
export async function pruneRuns(
  db: Queryable,
  now: Date | null,
  retentionDays: number,
  limit = RUN_PRUNE_BATCH,
): Promise<number> {
  const rows = await db.query<{ n: number }>(PRUNE_RUNS, [now, retentionDays, limit]);
  return rows[0]?.n ?? 0;
}
