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

/** Counts one hit in the bucket's window and returns the window's hits so far. */
export function countHit(db: Queryable, bucket: string, windowStart: number): Promise<number> {
  return addHits(db, bucket, windowStart, 1);
}

/** Adds `n` hits to the bucket's window and returns the window's hits so far. */
export async function addHits(
  db: Queryable,
  bucket: string,
  windowStart: number,
  n: number,
): Promise<number> {
  const [row] = await db.query<{ hits: number }>(
    `INSERT INTO rate_limit_counters (bucket, window_start, hits) VALUES ($1, $2, $3)
     ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limit_counters.hits + $3
     RETURNING hits`,
    [bucket, windowStart, n],
  );
  return row?.hits ?? n;
}
