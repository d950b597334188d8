import { setBounded } from '../lib/bounded-map.ts';
import { type RateState, rateState, windowStart } from './rate-limit.ts';

/**
 * Adds `n` hits to a bucket's window in the shared counter table and returns the window's
 * total after the addition.
 */
export type ClaimHits = (bucket: string, windowStart: number, n: number) => Promise<number>;

interface WindowBudget {
  window: number;
  /** The shared counter's value after this process's last claim, counting only what was granted. */
  claimed: number;
  /** Hits this process claimed but has not served yet. */
  allowance: number;
  /** The limit was reached: once the allowance is served, the window's requests are refused without a claim. */
  exhausted: boolean;
  /** The claim in flight: one at a time per bucket, so a burst shares it instead of over-claiming. */
  claiming: Promise<void> | undefined;
  /** Requests waiting for that claim (the next claim takes at least this many). */
  waiting: number;
  /** Hits the last claim granted: when the allowance falls to a quarter of it, the next is claimed. */
  lastGrant: number;
}

/**
 * The most hits one claim takes ahead. Claiming ahead is what keeps the database out of most
 * requests; the cap bounds what a process can hold unused when its traffic stops.
 */
const MAX_CLAIM = 200;
/** A claim takes at most this share of what is left in the window, so processes share the tail. */
const CLAIM_SHARE = 8;
/**
 * The smallest grant after which the next claim is made ahead, before the allowance runs out.
 * Below it the window's end is near and batches are shrinking: claiming ahead would only hold
 * hits back from other processes.
 */
const PREFETCH_FROM_GRANT = 16;
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

  /**
   * The hit counted at once when this process already holds what decides it (an allowance left
   * in the current window, or the window known to be exhausted); undefined when it must claim
   * first: then hit() does.
   */
  hitNow(bucket: string, limit: number, now: Date): RateState | undefined {
    const budget = this.#budgets.get(bucket);
    if (!budget || budget.window !== windowStart(now)) return undefined;
    if (budget.allowance > 0) {
      budget.allowance--;
      const state = rateState(now, limit, budget.claimed - budget.allowance);
      this.#claimAhead(bucket, budget, limit);
      return state;
    }
    return budget.exhausted ? rateState(now, limit, limit + 1) : undefined;
  }

  async hit(bucket: string, limit: number, now: Date): Promise<RateState> {
    const window = windowStart(now);
    let budget = this.#budgets.get(bucket);
    if (!budget || budget.window !== window) {
      budget = {
        window,
        claimed: 0,
        allowance: 0,
        exhausted: false,
        claiming: undefined,
        waiting: 0,
        lastGrant: 0,
      };
      setBounded(this.#budgets, bucket, budget, MAX_BUCKETS);
    }
    // Each pass either serves, refuses, or waits for a claim that grants at least one hit or
    // marks the window exhausted, so the loop ends.
    for (;;) {
      if (budget.allowance > 0) {
        budget.allowance--;
        const state = rateState(now, limit, budget.claimed - budget.allowance);
        this.#claimAhead(bucket, budget, limit);
        return state;
      }
      if (budget.exhausted) return rateState(now, limit, limit + 1);
      if (!budget.claiming) this.#startClaim(bucket, budget, limit, false);
      budget.waiting++;
      try {
        await budget.claiming;
      } finally {
        budget.waiting--;
      }
    }
  }

  #startClaim(bucket: string, budget: WindowBudget, limit: number, ahead: boolean): void {
    const claim = this.#claimMore(bucket, budget, limit);
    // A claim made ahead has no request waiting on it; if it fails, the request that finds the
    // allowance empty claims again and gets the error.
    budget.claiming = (ahead ? claim.catch(() => undefined) : claim).finally(() => {
      budget.claiming = undefined;
    });
  }

  /**
   * Claims the next batch while a quarter of the last one is still to serve, so that a steady
   * stream of requests never stops to wait for the database (with many requests queued on it,
   * as on the embedded database, that wait is long).
   */
  #claimAhead(bucket: string, budget: WindowBudget, limit: number): void {
    if (budget.claiming || budget.exhausted || budget.lastGrant < PREFETCH_FROM_GRANT) return;
    if (budget.allowance * 4 > budget.lastGrant || budget.claimed >= limit) return;
    this.#startClaim(bucket, budget, limit, true);
  }

  async #claimMore(bucket: string, budget: WindowBudget, limit: number): Promise<void> {
    // An eighth of what is left, or more for a burst waiting on this claim, but never more than
    // is left as far as this process knows (the counter is not inflated past the limit).
    const left = limit - budget.claimed;
    const want = Math.max(
      1,
      Math.min(MAX_CLAIM, left, Math.max(Math.floor(left / CLAIM_SHARE), budget.waiting + 1)),
    );
    const total = await this.#claim(bucket, budget.window, want);
    const before = total - want;
    if (before >= limit) {
      budget.exhausted = true;
      return;
    }
    const granted = Math.min(want, limit - before);
    budget.claimed = Math.max(budget.claimed, before + granted);
    budget.allowance += granted;
    budget.lastGrant = granted;
  }
}
