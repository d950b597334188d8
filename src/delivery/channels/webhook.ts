// Webhook delivery, after the Standard Webhooks convention (https://www.standardwebhooks.com):
// a JSON body signed with the organization's `whsec_` secret over `id.timestamp.body`, the id
// stable across retries so a receiver can drop a repeat. The URL is the user's, so requests
// go through the SSRF-guarded fetch the caller passes in; redirects are never followed (a
// receiver that moved must be updated, and following would re-send a signed body elsewhere).
import { Webhook } from 'standardwebhooks';
import { type FetchLike, OutboundUrlError } from '../../lib/outbound.ts';
import {
  type ChannelMessage,
  type DeliveryChannel,
  isNotice,
  MAX_RESPONSE_CHARS,
  type SendOutcome,
} from '../channel.ts';

/** At most this much of a receiver's answer is read; the attempt log keeps less still. */
const MAX_READ_BYTES = 64 * 1024;
/** A Retry-After further away than this is taken as this (a receiver cannot park us for weeks). */
const MAX_RETRY_AFTER_MS = 24 * 60 * 60 * 1000;

export interface WebhookChannelOptions {
  /** The guarded `outboundFetch(config)`: a webhook URL is a user's URL. */
  fetch: FetchLike;
  /** The organization's `whsec_…` signing secret. */
  secretOf: (organizationId: string) => Promise<string>;
  timeoutMs?: number;
  now?: () => Date;
}

/** "15 s", or "200 ms" below a second. */
export const durationText = (ms: number) => (ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`);

/**
 * Milliseconds a Retry-After header asks to wait (delta-seconds or an HTTP date), or undefined
 * when absent or unreadable. Shared with the SMS channel.
 */
export function retryAfterMs(header: string | null, now: Date = new Date()): number | undefined {
  if (!header) return undefined;
  const value = header.trim();
  let ms: number;
  if (/^\d+$/.test(value)) ms = Number(value) * 1000;
  else {
    const date = Date.parse(value);
    if (Number.isNaN(date)) return undefined;
    ms = Math.max(0, date - now.getTime());
  }
  return Math.min(ms, MAX_RETRY_AFTER_MS);
}

/**
 * The start of a response body as text: reads at most 64 KB (a receiver may answer with
 * anything, endlessly) and keeps `maxChars` of it. Never throws: a body that breaks
 * off mid-way yields what arrived. Shared with the SMS channel.
 */
export async function readResponseText(
  response: Response,
  maxChars: number = MAX_RESPONSE_CHARS,
): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < MAX_READ_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } catch {
    // Keep what arrived.
  } finally {
    reader.cancel().catch(() => {});
  }
  const text = new TextDecoder().decode(Buffer.concat(chunks).subarray(0, MAX_READ_BYTES));
  return text.slice(0, maxChars);
}

/** The OutboundUrlError behind an error, if any: the guard's DNS check fails inside fetch's connect. */
function guardErrorOf(err: unknown): OutboundUrlError | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof OutboundUrlError) return e;
  }
  return undefined;
}

/** A network failure in a few words: fetch hides the reason in `cause` (ECONNREFUSED and the like). */
export function networkErrorText(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const detail = cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
  return detail.slice(0, 300);
}

/**
 * The event: `run.completed` or `run.failed` with the run (and, for a changed output of a
 * deliverOn `change` task, `previousRunId`, `diff` and `diffTruncated`), or a task notice's kind
 * with its payload.
 */
function webhookBody(message: ChannelMessage) {
  const task = { id: message.task.id, name: message.task.name };
  const timestamp = message.occurredAt.toISOString();
  if (isNotice(message)) {
    return { type: message.notice.kind, timestamp, data: { task, ...message.notice.payload } };
  }
  const { change } = message;
  return {
    type: message.run.status === 'failed' ? 'run.failed' : 'run.completed',
    timestamp,
    data: {
      run: message.run,
      task,
      ...(change && {
        previousRunId: change.previousRunId,
        diff: change.diff,
        diffTruncated: change.diffTruncated,
      }),
    },
  };
}

export function webhookChannel(options: WebhookChannelOptions): DeliveryChannel {
  const { fetch, secretOf, timeoutMs = 15_000, now = () => new Date() } = options;

  return {
    async send(target, message, signal): Promise<SendOutcome> {
      let url: URL;
      try {
        url = new URL(target);
      } catch {
        return { ok: false, permanent: true, error: 'the webhook URL is not a valid URL' };
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        return { ok: false, permanent: true, error: 'a webhook URL must use http or https' };
      }

      let secret: string;
      try {
        secret = await secretOf(message.organizationId);
      } catch {
        // Most likely the database for a moment: worth another attempt. The cause stays out of
        // the attempt log, which the organization sees.
        return { ok: false, permanent: false, error: 'the webhook signing secret could not be loaded' };
      }

      const body = JSON.stringify(webhookBody(message));
      // The signature covers this attempt's time: receivers reject stale timestamps.
      const attemptDate = now();
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'svc-webhooks/1',
        'webhook-id': message.deliveryId,
        'webhook-timestamp': String(Math.floor(attemptDate.getTime() / 1000)),
        'webhook-signature': new Webhook(secret).sign(message.deliveryId, attemptDate, body),
      };

      const timeout = AbortSignal.timeout(timeoutMs);
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers,
          body,
          redirect: 'manual',
          signal: AbortSignal.any([signal, timeout]),
        });
      } catch (err) {
        const refusal = guardErrorOf(err);
        if (refusal) {
          // A policy refusal will not change; a host that does not resolve may (DNS, a new domain).
          return { ok: false, permanent: refusal.reason === 'refused', error: refusal.message };
        }
        if (timeout.aborted) {
          return { ok: false, permanent: false, error: `no answer within ${durationText(timeoutMs)}` };
        }
        if (signal.aborted) return { ok: false, permanent: false, error: 'the delivery was interrupted' };
        return { ok: false, permanent: false, error: `the request failed: ${networkErrorText(err)}` };
      }

      const statusCode = response.status;
      const text = await readResponseText(response);
      const answer = text === '' ? {} : { response: text };
      if (statusCode >= 200 && statusCode < 300) return { ok: true, statusCode, ...answer };
      if (statusCode >= 300 && statusCode < 400) {
        const location = response.headers.get('location')?.slice(0, 200);
        return {
          ok: false,
          permanent: false,
          statusCode,
          error: `the receiver answered ${statusCode}${location ? ` (to ${location})` : ''}; redirects are not followed`,
          ...answer,
        };
      }
      if (statusCode === 410) {
        return {
          ok: false,
          permanent: true,
          statusCode,
          error: 'the receiver answered 410 Gone: no more retries',
          ...answer,
        };
      }
      const wait =
        statusCode === 429 || statusCode === 503
          ? retryAfterMs(response.headers.get('retry-after'), now())
          : undefined;
      return {
        ok: false,
        permanent: false,
        statusCode,
        error: `the receiver answered ${statusCode}`,
        ...answer,
        ...(wait !== undefined && { retryAfterMs: wait }),
      };
    },
  };
}
