/**
 * Time is a dependency: code that needs "now" takes a Clock, so tests drive time instead of
 * sleeping. What is due in the database is decided by the database's own now().
 */
export interface Clock {
  now(): Date;
  /**
   * True for a clock that tests drive: then it, not the database server, says what is due.
   * With the system clock, the database's clock_timestamp() decides, so processes on machines
   * whose clocks disagree still agree on what is due.
   */
  readonly manual?: boolean;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock that only moves when told to; for tests and simulations. */
export class ManualClock implements Clock {
  readonly manual = true;
  #ms: number;
  constructor(start: Date | string | number) {
    this.#ms = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.#ms);
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
