// One model request with its retries, the policy of the provider SDKs (OpenAI's and others
// generated alike): a lost connection, a request whose answer did not start in time, and the
// statuses 408, 409, 429 and 5xx are tried again, up to MODEL_MAX_RETRIES more times, after an
// exponential backoff with jitter (0.5 s doubling to at most 8 s, less up to a quarter) or the
// wait the provider asked for (`retry-after-ms`, `Retry-After` in seconds or as a date). The
// provider's `x-should-retry: true|false` overrides the status. A wait asked for beyond
// MAX_RETRY_AFTER_MS is not honoured as asked: the backoff is used (a provider's "come back in
// an hour" must not hold a run's place that long; its timeout would end it first anyway).
import { setTimeout as sleep } from 'node:timers/promises';
import type { ResponseTooLargeError } from './capped-response.ts';
import { tooLargeIn } from './capped-response.ts';
import {
  answerText,
  type ModelHttpAnswer,
  type ModelPost,
  ModelTimeoutError,
  type ModelTransport,
} from './model-transport.ts';

/** Retries of one model request after the first attempt (429, 5xx, timeouts, lost connections). */
export const MODEL_MAX_RETRIES = 4;
/** The longest wait a provider may ask for before a retry and have it honoured. */
export const MAX_RETRY_AFTER_MS = 60_000;
const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 8_000;

/** Why a request got no answer to read, after its retries. */
export type RequestFailure =
  | { kind: 'timeout' }
  | { kind: 'unreachable'; detail: string }
  | { kind: 'refused'; status: number; body: string }
  | { kind: 'too_large'; error: ResponseTooLargeError };

export type RequestOutcome = { ok: true; answer: ModelHttpAnswer } | { ok: false; failure: RequestFailure };

function retryable(answer: ModelHttpAnswer): boolean {
  const asked = answer.headers['x-should-retry'];
  if (asked === 'true') return true;
  if (asked === 'false') return false;
  const s = answer.status;
  return s === 408 || s === 409 || s === 429 || s >= 500;
}

/** The backoff before retry number `retry` (0 for the first). */
export function backoffMs(retry: number, random = Math.random): number {
  return Math.min(FIRST_BACKOFF_MS * 2 ** retry, MAX_BACKOFF_MS) * (1 - random() * 0.25);
}

/** The wait the provider asked for, if it asked for one this honours. */
export function askedWaitMs(headers: ModelHttpAnswer['headers'], now = Date.now()): number | undefined {
  const ms = Number.parseFloat(String(headers['retry-after-ms'] ?? ''));
  let wait = Number.isNaN(ms) ? undefined : ms;
  const after = headers['retry-after'];
  if (wait === undefined && typeof after === 'string' && after !== '') {
    const seconds = Number.parseFloat(after);
    wait = Number.isNaN(seconds) ? Date.parse(after) - now : seconds * 1000;
  }
  return wait !== undefined && wait >= 0 && wait <= MAX_RETRY_AFTER_MS ? wait : undefined;
}

/** Sleeps `ms`, or rejects with the signal's reason as soon as it aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return sleep(ms, undefined, { signal }).catch(() => {
    throw signal.reason;
  });
}

/**
 * Sends the request until an answer with a 2xx status starts (its body then read by the caller)
 * or the retries are spent. Rejects only when `signal` aborts (its reason), the caller's to tell.
 */
export async function postWithRetries(
  transport: ModelTransport,
  request: ModelPost,
  maxRetries = MODEL_MAX_RETRIES,
): Promise<RequestOutcome> {
  const { signal } = request;
  for (let retry = 0; ; retry++) {
    let answer: ModelHttpAnswer;
    try {
      answer = await transport.post(request);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (retry < maxRetries) {
        await pause(backoffMs(retry), signal);
        continue;
      }
      if (err instanceof ModelTimeoutError) return { ok: false, failure: { kind: 'timeout' } };
      return { ok: false, failure: { kind: 'unreachable', detail: (err as Error).message || String(err) } };
    }
    if (answer.status >= 200 && answer.status <= 299) return { ok: true, answer };
    if (retryable(answer) && retry < maxRetries) {
      // The body of an answer retried is not wanted: its transfer is ended.
      await answer.body?.return?.();
      await pause(askedWaitMs(answer.headers) ?? backoffMs(retry), signal);
      continue;
    }
    try {
      return {
        ok: false,
        failure: { kind: 'refused', status: answer.status, body: await answerText(answer) },
      };
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      const tooLarge = tooLargeIn(err);
      if (tooLarge) return { ok: false, failure: { kind: 'too_large', error: tooLarge } };
      return { ok: false, failure: { kind: 'unreachable', detail: (err as Error).message || String(err) } };
    }
  }
}
