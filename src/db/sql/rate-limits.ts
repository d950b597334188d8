import type { Queryable } from '../db.ts';

/** Drops counter rows of windows that ended; the current and previous windows are kept. */
export async function pruneRateLimitCounters(db: Queryable, currentWindowStart: number): Promise<number> {
  const rows = await db.query<{ n: number }>(
    `WITH gone AS (DELETE FROM rate_limit_counters WHERE window_start < $1 RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [currentWindowStart - 60],
  );
  return rows[0]?.n ?? 0;
}
