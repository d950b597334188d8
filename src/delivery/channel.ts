// The one interface every delivery channel (email, sms, webhook) implements. The dispatcher
// (durable jobs, retries, the attempt log) knows nothing of how a channel sends; a channel
// knows nothing of jobs: it makes one attempt and says how it went, as a value.
import type { Run } from '../schemas/run.ts';

export const CHANNEL_TYPES = ['email', 'sms', 'webhook'] as const;
export type ChannelType = (typeof CHANNEL_TYPES)[number];

/** What is delivered: a finished run and its task. */
export interface DeliveryMessage {
  /** The run as the API shows it (a webhook's `data.run`); status completed or failed. */
  run: Run;
  task: { id: string; name: string };
  organizationId: string;
  /**
   * The delivery's id, the same on every attempt: the `webhook-id` header, so a receiver can
   * drop a repeat.
   */
  deliveryId: string;
  /** When the run ended: the `timestamp` of a webhook body. */
  occurredAt: Date;
  /** A link to the run for people; undefined when SVC_PUBLIC_URL is not set. */
  runUrl: string | undefined;
}

/**
 * How one attempt went.
 * - ok: the destination took it (`statusCode`/`response` of the receiver when there is one);
 * - not ok: `permanent` failures are not retried (a missing configuration, an invalid address,
 *   a webhook receiver answering 410 Gone); others are, after `retryAfterMs` when the receiver
 *   asked for it (Retry-After). `response` is the start of the receiver's answer (truncated).
 */
export type SendOutcome =
  | { ok: true; statusCode?: number; response?: string }
  | {
      ok: false;
      permanent: boolean;
      error: string;
      statusCode?: number;
      response?: string;
      retryAfterMs?: number;
    };

export interface DeliveryChannel {
  /** One attempt to deliver `message` to `target` (an address, a number, a URL). Never throws. */
  send(target: string, message: DeliveryMessage, signal: AbortSignal): Promise<SendOutcome>;
}

/** A receiver's answer kept in the attempt log is cut to this many characters. */
export const MAX_RESPONSE_CHARS = 1000;
