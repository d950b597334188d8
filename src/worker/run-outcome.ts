// What an execution came to, written down: its end (completed, failed, timed out) with the
// usage it carried, or, for a run stopped before its end (canceled, lease lost, shutdown), what
// that calls for; then the run's usage reported to billing and one log line. Apart from the
// worker's loop (worker.ts), which decides what runs where; this decides what is recorded.

import { queueUsageReport } from '../billing/usage-meter.ts';
import { isDatabaseUnavailable } from '../db/db.ts';
import { notify } from '../db/sql/notify.ts';
import { canceledAmong } from '../db/sql/run-cancel.ts';
import type { RunContextRow } from '../db/sql/run-context.ts';
import { releaseRun } from '../db/sql/run-queue.ts';
import type { RunRow } from '../db/sql/runs.ts';
import { type ModelCallUsage, settleDeletedRun } from '../db/sql/usage.ts';
import type { Deps } from '../domain/deps.ts';
import { infoLineWriter } from '../lib/logger.ts';
import type { RunResult } from '../runner/executor.ts';
import type { RunUsage } from './run-usage.ts';
import type { RunWriteBatcher } from './run-writes.ts';

/** How long a finished run's result is retried while the database is unreachable. */
const RECORD_RETRY_MS = 10 * 60_000;

/**
 * Why an execution was cut short. 'canceled': a cancel request ended the run in the database
 * (domain/run-control.ts); the worker only stops executing it.
 */
export type AbortReason = 'lease_lost' | 'shutdown' | 'timeout' | 'canceled';

export class RunOutcomes {
  readonly #deps: Deps;
  readonly #workerId: string;
  readonly #runWrites: RunWriteBatcher;
  /** Runs whose recorded end already told the other workers of the place it freed. */
  readonly #endsTold = new Set<string>();
  /**
   * The 'run finished' line, one per run: its members are a uuid, enum values and a number, none
   * of them a credential nor text to escape, so it is written without pino's redaction pass and
   * generic formatting, like the access line (lib/logger.ts, infoLineWriter). Through pino, the
   * redaction parsed its ten paths and cloned the object at every line: 11 µs of a worker's CPU
   * per run and 3 KB of garbage (CPU and sampling heap profiles, instant model, concurrency 8).
   */
  readonly #writeLine: (members: string, msg: string) => void;

  constructor(deps: Deps, workerId: string, runWrites: RunWriteBatcher) {
    this.#deps = deps;
    this.#workerId = workerId;
    this.#runWrites = runWrites;
    this.#writeLine = infoLineWriter(deps.log);
  }

  /**
   * Whether the run's end was written (and so told the other workers of the place it freed);
   * asked once, when the run has left this worker.
   */
  endTold(runId: string): boolean {
    return this.#endsTold.delete(runId);
  }

  /**
   * Writes one model call's usage to the ledger and brings the run's own figures up to date, in
   * one statement (retried while the database is unreachable, under one id so that it counts
   * once; committed with other runs' writes that arrive meanwhile). It is written whatever
   * happens to the run meanwhile: the provider has charged for the call. Never rejects; usage
   * that could not be written is logged with its figures.
   */
  async recordUsage(call: ModelCallUsage, signal: AbortSignal): Promise<void> {
    const { log } = this.#deps;
    try {
      await this.#whileDatabaseReturns(
        call.runId,
        signal,
        () => this.#runWrites.recordUsage(call),
        'a model call',
      );
    } catch (err) {
      log.error(
        { err, runId: call.runId, callId: call.id, tokensUsed: call.tokensUsed, costCents: call.costCents },
        "a model call's usage could not be recorded",
      );
    }
  }

  /**
   * What a run stopped before its end calls for: a cancel ended it already; a run whose lease
   * was lost is another worker's (or was deleted with its task); one stopped by a shutdown goes
   * back to the queue. `context` is undefined for a run whose task was deleted while it was
   * claimed; `recorded` is the usage it paid for, already on the ledger.
   */
  async stopped(
    run: RunRow,
    context: RunContextRow | undefined,
    reason: Exclude<AbortReason, 'timeout'>,
    recorded: { tokensUsed: number; costCents: number } = { tokensUsed: 0, costCents: 0 },
  ): Promise<void> {
    const { db, log, metrics } = this.#deps;
    switch (reason) {
      case 'canceled':
        // The cancel ended the run (failed, canceled_at, no delivery) and freed its place; the
        // usage of the answers received before it stopped is on the ledger and copied to it.
        metrics.runsReleased.inc({ reason: 'canceled' });
        log.info({ runId: run.id, tokensUsed: recorded.tokensUsed }, 'run stopped: it was canceled');
        break;
      case 'lease_lost':
        // Another worker holds the run now (or it was deleted with its task); only the usage
        // this one paid for, already on the ledger, is kept.
        metrics.runsReleased.inc({ reason: 'lease_lost' });
        if (await settleDeletedRun(db, run.id, 'failed')) {
          log.info(
            { runId: run.id },
            'run stopped: it was deleted with its task; its usage stays on the ledger',
          );
        } else {
          log.warn({ runId: run.id }, 'run abandoned: its lease was lost to another worker');
        }
        break;
      case 'shutdown':
        if (await releaseRun(db, run.id, this.#workerId)) {
          await notify(db, 'svc_runs');
          metrics.runsReleased.inc({ reason: 'shutdown' });
          log.info({ runId: run.id }, 'run released to the queue: shutdown grace period over');
        }
        break;
    }
    if (context) await this.#reportUsage(context, run.organization_id, recorded.costCents, run.id);
  }

  /**
   * Records what the execution of `run` came to: `result` is undefined when the executor was
   * aborted without returning one; `signal`'s reason, when aborted, decides first. `heldMs`:
   * how long the run waited here between its claim and its execution (claim-ahead.ts).
   */
  async record(
    run: RunRow,
    context: RunContextRow,
    result: RunResult | undefined,
    signal: AbortSignal,
    usage: RunUsage,
    heldMs: number,
  ): Promise<void> {
    const { db, clock, log, metrics } = this.#deps;
    const recorded = usage.reported;
    const reason = signal.aborted ? (signal.reason as AbortReason) : undefined;
    // A stopped run's carried calls are on the ledger before its usage is reported below (a
    // timed-out run's too: it is rare enough not to carry them to its end).
    if (reason) await usage.flush();
    switch (reason) {
      case 'canceled':
      case 'lease_lost':
      case 'shutdown':
        return this.stopped(run, context, reason, recorded);
      case 'timeout':
        result = {
          ok: false,
          errorType: 'timeout',
          message: `The run did not finish within ${Math.round(this.#deps.config.worker.runTimeoutMs / 1000)} s and was stopped`,
          tokensUsed: result?.tokensUsed ?? 0,
          costCents: result?.costCents ?? 0,
        };
        break;
      case undefined:
        break;
    }
    if (!result) throw new Error('the executor returned no result without being aborted');
    const ended = result;
    const status = ended.ok ? 'completed' : 'failed';
    // Recorded with the ends of other runs that arrive meanwhile (one commit), then the
    // notifications it calls for are sent: svc_deliveries for its queued deliveries, svc_runs
    // for the place it frees.
    const finished = await usage.withEnd((calls) =>
      this.#whileDatabaseReturns(run.id, signal, () =>
        this.#runWrites.recordEnd(
          run,
          this.#workerId,
          {
            status,
            // A run failed by a check keeps what the model produced, for its owner to see.
            output: ended.ok ? ended.output : (ended.output ?? null),
            error: ended.ok ? null : ended.message,
            completedAt: clock.statementNow(),
            heldMs,
          },
          calls,
        ),
      ),
    );
    this.#endsTold.add(run.id);
    if (!finished) {
      if (await settleDeletedRun(db, run.id, status)) {
        log.info(
          { runId: run.id },
          'run ended after it was deleted with its task; its usage stays on the ledger',
        );
      } else if ((await canceledAmong(db, [run.id])).size) {
        log.info({ runId: run.id }, 'run result dropped: the run was canceled before it was recorded');
      } else {
        log.warn({ runId: run.id }, 'run result dropped: the lease was lost before it was recorded');
      }
      await this.#reportUsage(context, run.organization_id, recorded.costCents, run.id);
      return;
    }
    await this.#reportUsage(context, finished.organization_id, Number(finished.cost_cents), run.id);
    metrics.runsFinished.inc({ status: finished.status });
    this.#writeLine(
      `"runId":"${run.id}","status":"${finished.status}","durationMs":${finished.duration_ms ?? null}${ended.ok ? '' : `,"errorType":"${ended.errorType}"`}`,
      'run finished',
    );
  }

  /**
   * Usage beyond the plan's credits is reported to Stripe (paid plan with a customer, as the
   * run found it); the report covers the whole period, so a skipped or failed one is caught up
   * by the organization's next run.
   */
  async #reportUsage(
    context: RunContextRow,
    organizationId: string,
    costCents: number,
    runId: string,
  ): Promise<void> {
    const { plan, payment_customer_id } = context.organization;
    if (costCents > 0 && plan === 'paid' && payment_customer_id) {
      await queueUsageReport(this.#deps, organizationId).catch((err: unknown) =>
        this.#deps.log.warn({ err, runId }, 'usage report could not be queued'),
      );
    }
  }

  /**
   * Writes a result, retrying while the database is unreachable (backoff up to 5 s, for up to
   * 10 minutes, or until shutdown gives up on the run): the answer was paid for, and losing it
   * would run the task again. A worker does not recover the leases of runs still in its hands,
   * and the heartbeat renews them once the database is back; a write another worker overtook
   * is refused by the lease check of the run's end (recordLockedRunEnd), never recorded twice.
   */
  async #whileDatabaseReturns<T>(
    runId: string,
    signal: AbortSignal,
    write: () => Promise<T>,
    what = 'the run result',
  ): Promise<T> {
    const deadline = performance.now() + RECORD_RETRY_MS;
    for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
      try {
        return await write();
      } catch (err) {
        const shutdown = signal.aborted && signal.reason === ('shutdown' satisfies AbortReason);
        if (!isDatabaseUnavailable(err) || shutdown || performance.now() + delay > deadline) throw err;
        this.#deps.log.warn(
          { runId, err: (err as Error).message, retryInMs: delay },
          `${what} could not be recorded: the database is unavailable; retrying`,
        );
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }
}
