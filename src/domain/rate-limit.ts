import { epochSeconds } from '../lib/clock.ts';

/**
 * Fixed one-minute windows. `X-RateLimit-Reset` is the window's end in Unix epoch seconds;
 * `Retry-After` is a delta in seconds (at least 1).
 */
export const WINDOW_SECONDS = 60;

export interface RateState {
  limit: number;
  remaining: number;
  /** Unix epoch seconds at which the window ends. */
  reset: number;
  exceeded: boolean;
  /** Seconds until the window ends. */
  retryAfter: number;
}

export function windowStart(now: Date): number {
  const s = epochSeconds(now);
  return s - (s % WINDOW_SECONDS);
}

export function rateState(now: Date, limit: number, hits: number): RateState {
  const reset = windowStart(now) + WINDOW_SECONDS;
  return {
    limit,
    remaining: Math.max(0, limit - hits),
    reset,
    exceeded: hits > limit,
    retryAfter: Math.max(1, reset - epochSeconds(now)),
  };
}

export function rateLimitHeaders(state: RateState): Record<string, string> {
  return {
    'x-ratelimit-limit': String(state.limit),
    'x-ratelimit-remaining': String(state.remaining),
    'x-ratelimit-reset': String(state.reset),
  };
}
