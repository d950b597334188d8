// When a failed delivery is tried again: pure, so the schedule is tested without waiting.

/** A receiver may ask for a later retry (Retry-After), but never pushes one beyond a day. */
const MAX_DELAY_MS = 86_400_000;
/** Each delay is spread by ±20% so that retries of many deliveries do not arrive in bursts. */
const JITTER = 0.2;

/**
 * The delay before the next attempt after `roundAttempts` failed attempts of this round, or
 * undefined when the schedule is used up (the delivery has failed). A receiver's Retry-After
 * is honoured when it asks for longer than the schedule would wait.
 */
export function nextRetryDelay(
  roundAttempts: number,
  scheduleMs: readonly number[],
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number | undefined {
  const base = scheduleMs[roundAttempts - 1];
  if (base === undefined) return undefined;
  const jittered = base * (1 - JITTER + 2 * JITTER * random());
  return Math.min(MAX_DELAY_MS, Math.round(Math.max(jittered, retryAfterMs ?? 0)));
}
