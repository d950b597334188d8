import type { Queryable } from '../db/db.ts';

/**
 * Time is a dependency: code that needs "now" takes a Clock, so tests drive time instead of
 * sleeping. A Clock has two readings: the process's own, and the one several processes must
 * agree on. The service runs on the database clock (db/sql/time.ts), for which the second is
 * the database server's; tests run on a ManualClock, for which both are the time it was set to.
 */
export interface Clock {
  /** This process's reading: what is shown, logged or timed within one process. */
  now(): Date;
  /** "Now" for decisions that several processes must agree on (what is due, whose lease expired). */
  agreedNow(db: Queryable): Promise<Date>;
  /** The same, given the database's clock as a statement has just read it anyway. */
  agreedNowFrom(databaseNow: Date): Date;
  /** The time to give a statement that records "now" itself; null lets it read the database's. */
  statementNow(): Date | null;
}

/** A clock that only moves when told to; for tests and simulations. */
export class ManualClock implements Clock {
  #ms: number;
  constructor(start: Date | string | number) {
    this.#ms = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.#ms);
  }
  agreedNow(): Promise<Date> {
    return Promise.resolve(this.now());
  }
  agreedNowFrom(): Date {
    return this.now();
  }
  statementNow(): Date {
    return this.now();
  }
  set(to: Date | string | number): void {
    this.#ms = new Date(to).getTime();
  }
  advance(ms: number): void {
    this.#ms += ms;
  }
}

export function epochSeconds(d: Date): number {
  return Math.floor(d.getTime() / 1000);
}
