// The delivery dispatcher (part of the worker role). Delivery jobs live in the deliveries
// table; the dispatcher claims due ones under a lease, makes one attempt through the job's
// channel and records the attempt with its consequence (delivered, retry at a later time, or
// failed) in one transaction. Nothing is kept in memory that a restart would lose: a job whose
// dispatcher died is due again when its lease expires.
import {
  claimDeliveries,
  type DeliveryRow,
  nearestDeliveryAt,
  recordAttempt,
  recoverExpiredDeliveries,
  releaseDelivery,
  taskNameOf,
  taskNameOfRun,
} from '../db/sql/deliveries.ts';
import { findRun } from '../db/sql/runs.ts';
import type { TaskNotice } from '../db/sql/task-notices.ts';
import type { Deps } from '../domain/deps.ts';
import { runView } from '../domain/runs.ts';
import { leaseOwnerId } from '../lib/ids.ts';
import { Loop } from '../lib/loop.ts';
import type { ChannelMessage, ChannelType, DeliveryChannel, SendOutcome } from './channel.ts';
import { unifiedDiff } from './diff.ts';
import { nextRetryDelay } from './retry.ts';

/**
 * How long a claimed job is this dispatcher's. Longer than any one attempt can take (webhooks
 * and SMS give up after SVC_DELIVERY_TIMEOUT_SECONDS, at most 30 s, SMTP after that per step),
 * so a live dispatcher never loses one.
 */
const LEASE_MS = 120_000;
/** The longest sleep between looks; wake-ups come from NOTIFY svc_deliveries and due times. */
const MAX_SLEEP_MS = 60_000;

export class DeliveryDispatcher {
  readonly id = leaseOwnerId();
  readonly #deps: Deps;
  readonly #channels: Record<ChannelType, DeliveryChannel>;
  readonly #active = new Set<string>();
  /** Looks at each NOTIFY svc_deliveries, nearest due time, or at least every MAX_SLEEP_MS. */
  readonly #loop: Loop;

  constructor(deps: Deps, channels: Record<ChannelType, DeliveryChannel>) {
    this.#deps = deps;
    this.#channels = channels;
    this.#loop = new Loop({
      name: 'delivery dispatcher',
      pass: () => this.#pass(),
      pollMs: MAX_SLEEP_MS,
      channel: { name: 'svc_deliveries', listen: (c, f) => deps.db.listen(c, f) },
      log: deps.log,
    });
  }

  async start(): Promise<void> {
    await this.#loop.start();
  }

  wake(): void {
    this.#loop.wake();
  }

  /**
   * Stops claiming; attempts in flight get `graceMs` to end, then are aborted and their jobs
   * given back untried (due at once, for this or another process).
   */
  async stop(graceMs: number): Promise<void> {
    await this.#loop.stop(graceMs);
  }

  /** Recovers expired leases, claims what fits, and sleeps until the nearest due time. */
  async #pass(): Promise<number> {
    const { db, clock, config, log } = this.#deps;
    const now = await clock.agreedNow(db);
    const recovered = await recoverExpiredDeliveries(db, now);
    if (recovered) log.warn({ recovered }, 'deliveries of a stopped dispatcher are due again');
    const free = config.delivery.concurrency - this.#active.size;
    if (free > 0 && !this.#loop.stopping) {
      const claimed = await db.transaction((tx) =>
        claimDeliveries(tx, { owner: this.id, now, leaseMs: LEASE_MS, limit: free }),
      );
      for (const job of claimed) this.#begin(job);
    }
    const next = await nearestDeliveryAt(db);
    return next ? next.getTime() - (await clock.agreedNow(db)).getTime() : MAX_SLEEP_MS;
  }

  #begin(job: DeliveryRow): void {
    const controller = new AbortController();
    this.#active.add(job.id);
    const done = this.#attempt(job, controller.signal)
      .catch((err) => this.#deps.log.error({ err, deliveryId: job.id }, 'delivery attempt crashed'))
      .finally(() => {
        this.#active.delete(job.id);
        this.wake();
      });
    this.#loop.track(controller, done);
  }

  /**
   * What the job sends: the run with its task (and, for a changed output, the diff against the
   * previous delivered run), or the task notice. Undefined when its run or task is gone
   * (deleting a run or task deletes its deliveries too; nothing is left to send).
   */
  async #messageOf(job: DeliveryRow, now: Date): Promise<ChannelMessage | undefined> {
    const { db, config } = this.#deps;
    const base = { organizationId: job.organization_id, deliveryId: job.id };
    if (job.run_id === null) {
      const task = job.task_id ? await taskNameOf(db, job.task_id) : undefined;
      if (!task) return undefined;
      // Written by queueTaskNotice or the run-end statement with the payload of its kind.
      const notice = { kind: job.kind, payload: job.payload } as unknown as TaskNotice;
      return { ...base, task, notice, occurredAt: job.created_at };
    }
    const [run, task, previous] = await Promise.all([
      findRun(db, job.organization_id, job.run_id),
      taskNameOfRun(db, job.run_id),
      job.previous_run_id ? findRun(db, job.organization_id, job.previous_run_id) : undefined,
    ]);
    if (!run || !task) return undefined;
    const change =
      previous && run.status === 'completed'
        ? unifiedDiff(
            { runId: previous.id, output: previous.output ?? '' },
            { runId: run.id, output: run.output ?? '' },
          )
        : undefined;
    return {
      ...base,
      run: runView(run),
      task,
      occurredAt: run.completed_at ?? now,
      runUrl: config.publicUrlSet ? `${config.publicUrl}/api/svc/runs/${run.id}` : undefined,
      ...(change &&
        previous && {
          change: { previousRunId: previous.id, diff: change.diff, diffTruncated: change.truncated },
        }),
    };
  }

  async #attempt(job: DeliveryRow, signal: AbortSignal): Promise<void> {
    const { db, clock, config, log, metrics } = this.#deps;
    const startedAt = await clock.agreedNow(db);
    const message = await this.#messageOf(job, startedAt);
    if (!message) return;
    const started = performance.now();
    const outcome: SendOutcome = await this.#channels[job.channel].send(job.target, message, signal);
    const durationMs = Math.round(performance.now() - started);
    const now = await clock.agreedNow(db);
    if (signal.aborted) {
      await releaseDelivery(db, job.id, this.id, now);
      return;
    }
    const delay =
      outcome.ok || outcome.permanent
        ? undefined
        : nextRetryDelay(job.round_attempts, config.delivery.retryScheduleMs, outcome.retryAfterMs);
    const next = outcome.ok
      ? ({ status: 'delivered' } as const)
      : delay === undefined
        ? ({ status: 'failed' } as const)
        : ({ status: 'pending', nextAttemptAt: new Date(now.getTime() + delay) } as const);
    const recorded = await db.transaction((tx) =>
      recordAttempt(tx, {
        deliveryId: job.id,
        runId: job.run_id,
        owner: this.id,
        attempt: job.attempts,
        startedAt,
        durationMs,
        outcome: outcome.ok ? 'delivered' : 'failed',
        statusCode: outcome.statusCode,
        error: outcome.ok ? undefined : outcome.error,
        response: outcome.response,
        next,
        now,
      }),
    );
    const context = { deliveryId: job.id, runId: job.run_id, channel: job.channel, attempt: job.attempts };
    if (!recorded) {
      log.warn(context, 'delivery attempt not recorded: its lease had expired');
      return;
    }
    const label = next.status === 'pending' ? 'retry' : next.status;
    metrics.deliveryAttempts.inc({ channel: job.channel, outcome: label });
    if (outcome.ok) log.info({ ...context, statusCode: outcome.statusCode }, 'delivered');
    else
      log.warn(
        { ...context, statusCode: outcome.statusCode, error: outcome.error, next: label },
        'delivery attempt failed',
      );
  }
}
