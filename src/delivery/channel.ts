// The one interface every delivery channel (email, sms, webhook) implements. The dispatcher
// (durable jobs, retries, the attempt log) knows nothing of how a channel sends; a channel
// knows nothing of jobs: it makes one attempt and says how it went, as a value.
import type { TaskNotice } from '../db/sql/task-notices.ts';
import type { Run } from '../schemas/run.ts';

export const CHANNEL_TYPES = ['email', 'sms', 'webhook'] as const;
export type ChannelType = (typeof CHANNEL_TYPES)[number];

/** What a channel sends: a finished run and its task, or a task notice. */
export type ChannelMessage = DeliveryMessage | NoticeMessage;

interface MessageBase {
  task: { id: string; name: string };
  organizationId: string;
  /**
   * The delivery's id, the same on every attempt: the `webhook-id` header, so a receiver can
   * drop a repeat.
   */
  deliveryId: string;
  /** When the run ended, or the notice was queued: the `timestamp` of a webhook body. */
  occurredAt: Date;
}

/** A finished run and its task. */
export interface DeliveryMessage extends MessageBase {
  /** The run as the API shows it (a webhook's `data.run`); status completed or failed. */
  run: Run;
  /** A link to the run for people; undefined when SVC_PUBLIC_URL is not set. */
  runUrl: string | undefined;
  /** deliverOn `change`: what changed since the previous delivered output. */
  change?: OutputChange;
}

/** A changed output against the task's previous delivered one. */
export interface OutputChange {
  previousRunId: string;
  /** A unified diff, previous output to this one (bounded: see delivery/diff.ts). */
  diff: string;
  /** Whether the diff was cut to its bound. */
  diffTruncated: boolean;
}

/** A task notice: its kind and payload (db/sql/task-notices.ts). */
export interface NoticeMessage extends MessageBase {
  notice: TaskNotice;
}

/** Whether a message is a task notice rather than a run's result. */
export const isNotice = (message: ChannelMessage): message is NoticeMessage => 'notice' in message;

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
  send(target: string, message: ChannelMessage, signal: AbortSignal): Promise<SendOutcome>;
}

/** A receiver's answer kept in the attempt log is cut to this many characters. */
export const MAX_RESPONSE_CHARS = 1000;
