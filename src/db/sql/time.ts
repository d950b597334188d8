import type { Clock } from '../../lib/clock.ts';
import type { Queryable } from '../db.ts';

/**
 * The service's clock: what several processes must agree on (what is due, whose lease expired)
 * is decided by the database server's clock, so processes on machines whose clocks disagree
 * still agree. Tests drive a ManualClock (lib/clock.ts) instead.
 */
export const databaseClock: Clock = {
  now: () => new Date(),
  async agreedNow(db: Queryable): Promise<Date> {
    const [row] = await db.query<{ now: Date }>('SELECT clock_timestamp() AS now');
    if (!row) throw new Error('clock_timestamp() returned no row');
    return row.now;
  },
  agreedNowFrom: (databaseNow: Date) => databaseNow,
  // null: the statement reads the database's clock itself (one round trip fewer).
  statementNow: () => null,
};
