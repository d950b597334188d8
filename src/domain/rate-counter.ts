import { type RateState, rateState, windowStart } from './rate-limit.ts';

/**
 * Adds `n` hits to a bucket's window in the shared counter table and returns the window's
 * total after the addition.
 */
export type ClaimHits = (bucket: string, windowStart: number, n: number) => Promise<number>;

interface WindowBudget {
  window: number;
  /** The shared counter's value after this process's last claim. */
  claimed: number;
  /** Hits this process claimed but has not served yet. */
  allowance: number;
  /** The limit was reached: once the allowance is served, the window's requests are refused without a claim. */
  exhausted: boolean;
}

/**
 * The most hits one claim takes ahead. Claiming ahead is what keeps the database out of most
 * requests; the cap bounds what a process can hold unused when its traffic stops.
 */
const MAX_CLAIM = 200;
/** A claim takes at most this share of what is left in the window, so processes share the tail. */
const CLAIM_SHARE = 8;
/** Windows remembered; older buckets are dropped (they belong to ended windows or idle callers). */
const MAX_BUCKETS = 10_000;

/**
 * Rate counting with the database off the hot path. Every api process claims hits from the
 * shared per-window counter in batches (at most an eighth of what is left, at most 200) and
 * serves requests from its batch in memory; near the limit the batches shrink to single hits,
 * so counting there is exact. The limit is never exceeded across processes: a claim that
 * crosses it is granted only up to it. What a process claimed and did not serve is lost when
 * the window ends, which can refuse other processes a little early, never late.
 */
export class RateCounter {
  readonly #claim: ClaimHits;
  readonly #budgets = new Map<string, WindowBudget>();

  constructor(claim: ClaimHits) {
    this.#claim = claim;
  }

  async hit(bucket: string, limit: number, now: Date): Promise<RateState> {
    const window = windowStart(now);
    let budget = this.#budgets.get(bucket);
    if (!budget || budget.window !== window) {
      budget = { window, claimed: 0, allowance: 0, exhausted: false };
      this.#remember(bucket, budget);
    }
    if (budget.allowance > 0) {
      budget.allowance--;
      return rateState(now, limit, budget.claimed - budget.allowance);
    }
    if (budget.exhausted) return rateState(now, limit, limit + 1);

    const want = Math.max(1, Math.min(MAX_CLAIM, Math.floor((limit - budget.claimed) / CLAIM_SHARE)));
    const total = await this.#claim(bucket, window, want);
    // The window may have moved on, or other requests claimed, while this one waited.
    if (budget !== this.#budgets.get(bucket)) return rateState(now, limit, Math.min(total, limit + 1));
    const before = total - want;
    if (before >= limit) {
      budget.exhausted = true;
      return rateState(now, limit, limit + 1);
    }
    const granted = Math.min(want, limit - before);
    // Concurrent claims of this process may land in any order: keep the highest counter seen
    // and pool the allowances.
    budget.claimed = Math.max(budget.claimed, before + granted);
    budget.allowance += granted - 1;
    return rateState(now, limit, budget.claimed - budget.allowance);
  }

  #remember(bucket: string, budget: WindowBudget): void {
    this.#budgets.delete(bucket);
    this.#budgets.set(bucket, budget);
    if (this.#budgets.size > MAX_BUCKETS) {
      const oldest = this.#budgets.keys().next().value;
      if (oldest !== undefined) this.#budgets.delete(oldest);
    }
  }
}
