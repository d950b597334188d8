// Claiming ahead: while a worker's runs are short, it claims more runs than it has free places
// and keeps the extra ones here, in claim order, to begin each the moment a place frees,
// without a claim's round trip in between. A claim's cost is paid per claim, not per run: with
// runs this short it is a large share of each, and a place that waits for the next claim
// idles. Long runs are never held: there a claim's cost is nothing beside the run, and a held
// run would wait a whole run while another worker could have begun it.

import type { RunContextRow } from '../db/sql/run-context.ts';
import type { RunRow } from '../db/sql/runs.ts';

// Short means an average execution (its begin to its last answer) under
// SVC_WORKER_CLAIM_AHEAD_MS, 50 ms by default. Measured with the peers bench's throughput
// modules (instant model, concurrency 8, 3,000 runs, alternated with claiming only for free
// places): 631-660 runs/s against 397-589, database CPU per run 0.68-0.73 ms against 0.94-1.34,
// write transactions per run 0.36-0.38 against 0.69-0.83. A 100 ms model, which no real
// provider undercuts, is above it.
//
// How many: twice the concurrency, up to MAX_AHEAD (never fewer than the concurrency). A claim
// costs the database about half a millisecond whatever it takes (executor start-up and
// shut-down of its plans, the locks, the commit), so what a run pays for it is that divided by
// the runs it takes; one more held run per place doubles a refill claim. Measured (instant
// model, 4 alternated pairs each, one worker): at concurrency 8, 1,000 runs, 846-979 runs/s
// and database CPU 0.45-0.55 ms per run with the concurrency held against 982-1,029 runs/s and
// 0.39-0.40 ms with twice as many (3,000 runs: claims of 7.3 runs on average before, 0.39-0.42
// against 0.34-0.36 ms); at concurrency 32 twice as many bought nothing (its claims already
// take about 30 runs), hence the bound. Held runs count as running towards
// SVC_ORG_CONCURRENCY, and wait at most two short executions for a place.

/**
 * Weight of the newest execution in the average (an exponential moving average): the last few
 * count, so that a fresh process's first executions (slower: nothing compiled yet, the first
 * connections) or a change of model are followed within a handful of runs.
 */
const NEWEST_WEIGHT = 0.25;

/** Held runs at most at twice the concurrency; a concurrency above it holds as many as itself. */
const MAX_AHEAD = 32;

/** A claimed run waiting here for a place; its lease is renewed and a cancel reaches it. */
export interface HeldRun {
  run: RunRow;
  /** Undefined: the task was deleted while its run was being claimed. */
  context: RunContextRow | undefined;
  controller: AbortController;
  /** When it was claimed (performance.now()). */
  heldAt: number;
  /** Settles what the worker tracks of it: its execution once begun, or its stop. */
  settle: (done: Promise<void>) => void;
}

export class ClaimAhead {
  readonly #concurrency: number;
  /** Executions shorter than this on average are short: 0 never claims ahead. */
  readonly #shortMs: number;
  readonly #held: HeldRun[] = [];
  /** The average execution here lately, ms; undefined before the first. */
  #executionMs: number | undefined;

  constructor(concurrency: number, shortMs: number) {
    this.#concurrency = concurrency;
    this.#shortMs = shortMs;
  }

  /** An execution here took `ms`. */
  executed(ms: number): void {
    this.#executionMs =
      this.#executionMs === undefined ? ms : this.#executionMs + NEWEST_WEIGHT * (ms - this.#executionMs);
  }

  /** Runs held beyond the free places while runs are short: two per place, up to MAX_AHEAD. */
  get ahead(): number {
    if (this.#executionMs === undefined || this.#executionMs >= this.#shortMs) return 0;
    return Math.max(this.#concurrency, Math.min(2 * this.#concurrency, MAX_AHEAD));
  }

  /**
   * Runs a claim asks for when `places` are free: those, and, while runs are short, as many
   * more as bring the held ones back to `ahead` once half of them have begun (so that a claim
   * takes several, not one per freed place).
   */
  limit(places: number): number {
    const ahead = this.ahead;
    const refill = this.#held.length <= ahead / 2 ? ahead - this.#held.length : 0;
    return Math.max(0, places) + refill;
  }

  get size(): number {
    return this.#held.length;
  }

  hold(run: HeldRun): void {
    this.#held.push(run);
  }

  /** The oldest held run, taken out. */
  next(): HeldRun | undefined {
    return this.#held.shift();
  }

  /** Takes `run` out; false when it had already left (begun, or stopped before). */
  remove(run: HeldRun): boolean {
    const i = this.#held.indexOf(run);
    if (i === -1) return false;
    this.#held.splice(i, 1);
    return true;
  }

  /** Every held run, oldest first. */
  all(): readonly HeldRun[] {
    return [...this.#held];
  }
}
