import type { Queryable } from '../db/db.ts';
import { pruneRuns, RUN_PRUNE_BATCH } from '../db/sql/run-retention.ts';

/**
 * Statements per pass, at most: a pass deletes at most 50,000 runs and the rest waits for the
 * next pass, so that turning retention on over years of history spreads its deletes (and their
 * WAL) over minutes instead of one long burst.
 */
const MAX_BATCHES_PER_PASS = 50;

/**
 * Deletes the ended runs past the retention (`retentionDays` after their creation, `now` null:
 * the database's now), RUN_PRUNE_BATCH per statement, each statement its own transaction.
 * Returns how many went.
 */
export async function pruneExpiredRuns(
  db: Queryable,
  now: Date | null,
  retentionDays: number,
): Promise<number> {
  let total = 0;
  for (let i = 0; i < MAX_BATCHES_PER_PASS; i++) {
    const n = await pruneRuns(db, now, retentionDays);
    total += n;
    if (n < RUN_PRUNE_BATCH) break;
  }
  return total;
}
