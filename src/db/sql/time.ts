import type { Clock } from '../../lib/clock.ts';
import type { Queryable } from '../db.ts';

/**
 * "Now" for decisions that several processes must agree on (what is due, whose lease expired):
 * the database server's clock, unless the clock is a manual one that tests drive.
 */
export async function currentTime(db: Queryable, clock: Clock): Promise<Date> {
  if (clock.manual) return clock.now();
  const [row] = await db.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  if (!row) throw new Error('clock_timestamp() returned no row');
  return row.now;
}

/**
 * The time to pass to a statement that records "now" itself: the manual clock's reading in
 * tests, else null, for which the statement uses the database's clock (one round trip fewer).
 */
export function statementTime(clock: Clock): Date | null {
  return clock.manual ? clock.now() : null;
}

/** Wakes the listeners of `channel` in every process, when the current transaction commits. */
export async function notify(
  db: Queryable,
  channel: 'svc_tasks' | 'svc_runs' | 'svc_deliveries' | 'svc_billing' | 'svc_principals',
): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [channel, '']);
}
