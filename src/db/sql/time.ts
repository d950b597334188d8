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

/**
 * A time as a timestamptz array element: ISO 8601 text. The driver turns a Date into text
 * through its own formatter (with the local offset), about 1.5 us each, where toISOString is a
 * fraction of that (measured in a profile of task creates, when their times still went as
 * arrays of Dates: 1.7 us per create). Null stays null (the database's clock decides).
 */
export const isoTime = (time: Date | null): string | null => (time === null ? null : time.toISOString());
