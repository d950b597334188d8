// The worker role: takes pending runs from the queue (runs table) under a lease, executes them
// and records the result. Correctness does not depend on this process staying alive: a run
// whose lease is not renewed is recovered by any worker (handed to another, or failed after
// SVC_RUN_MAX_ATTEMPTS starts), and every write is conditioned on still holding the lease.

import { canceledAmong } from '../db/sql/run-cancel.ts';
import { claimRuns } from '../db/sql/run-claim.ts';
import type { RunContextRow } from '../db/sql/run-context.ts';
import { notifyIfClaimable, renewLeases } from '../db/sql/run-queue.ts';
import type { RunRow } from '../db/sql/runs.ts';
import type { Deps } from '../domain/deps.ts';
import type { ReservedRunPlace } from '../domain/run-handoff.ts';
import { leaseOwnerId } from '../lib/ids.ts';
import { FirstOfTwo } from '../lib/local-signals.ts';
import { Loop } from '../lib/loop.ts';
import type { RunExecutor, RunResult } from '../runner/executor.ts';
import { CancelWatch } from './cancel-watch.ts';
import { ClaimAhead, type HeldRun } from './claim-ahead.ts';
import { recoverExpiredLeases } from './lease-recovery.ts';
import { type AbortReason, RunOutcomes } from './run-outcome.ts';
import { RunUsage } from './run-usage.ts';
import { RunWriteBatcher } from './run-writes.ts';

/**
 * Free places from which a claim is sent at once, without waiting a turn of the event loop for
 * more (#claimFreeSlots). Measured with the peers bench's throughput modules, alternated with
 * claiming at every freed place: with a 100 ms model, CPU per run (process + database) 1.41 ms
 * against 1.96 at concurrency 32 and 2.08 against 3.5 at 8 (claims per run about halved), runs/s
 * within 1.5%; with the instant model at concurrency 8, 1,374-1,428 runs/s against 1,265-1,332.
 * A 1 ms timer instead of the turn saved as much CPU but cost its millisecond in runs/s.
 */
const CLAIM_TOGETHER = 4;

interface ActiveRun {
  run: RunRow;
  controller: AbortController;
  done: Promise<void>;
  /** Still loading or executing; false while only its result is being recorded (or held). */
  executing: boolean;
  /** When its execution began (performance.now()). */
  begunAt: number;
}

export class RunWorker {
  readonly id = leaseOwnerId();
  readonly #deps: Deps;
  readonly #executor: RunExecutor;
  readonly #active = new Map<string, ActiveRun>();
  /**
   * Renews the leases of the runs held here, three times per lease period, so one late renewal
   * loses nothing. A Loop like the claims, stopped only after every run here has ended.
   */
  readonly #heartbeat: Loop;
  /**
   * Claims at each NOTIFY svc_runs and when a run here ends; the lease-period poll finds the
   * runs of workers that died (expired leases).
   */
  readonly #loop: Loop;
  /** Runs loading or executing: what SVC_WORKER_CONCURRENCY bounds. */
  #executing = 0;
  /** Runs claimed beyond the free places while runs are short, waiting for a place. */
  readonly #ahead: ClaimAhead;
  /** When expired leases were last looked for (this process's clock, ms). */
  #leasesCheckedAt = Number.NEGATIVE_INFINITY;
  /** Aborts the runs here that a cancel ended, told by NOTIFY svc_run_cancel. */
  readonly #cancels: CancelWatch;
  /**
   * A run made in this process (run now) wakes the claim at its commit, without waiting for its
   * NOTIFY svc_runs to come back from the database; whichever of the two comes second is left out.
   */
  readonly #wakes = new FirstOfTwo();
  #unsignal: (() => void) | undefined;
  #detachHandoff: (() => void) | undefined;
  /** Places reserved for run nows (counted in #executing too) and not yet begun or given back. */
  #reserved = 0;
  /** A claim found no free place while some were reserved. */
  #claimWhenReleased = false;
  /** The places the claim in flight may fill (its limit), 0 between claims. */
  #claiming = 0;
  /**
   * What each execution came to, recorded (its end, or what its stop calls for): the usage and
   * the ends of the runs held here, several per statement or transaction under load.
   */
  readonly #outcomes: RunOutcomes;

  constructor(deps: Deps, executor: RunExecutor) {
    this.#deps = deps;
    this.#executor = executor;
    this.#ahead = new ClaimAhead(deps.config.worker.concurrency, deps.config.worker.claimAheadBelowMs);
    this.#loop = new Loop({
      name: 'run worker',
      pass: async () => {
        await this.#claimFreeSlots();
        return undefined;
      },
      pollMs: deps.config.worker.leaseMs,
      retryMs: deps.config.worker.leaseMs,
      channel: {
        name: 'svc_runs',
        listen: (c, f) => deps.db.listen(c, f),
        heard: (p) => !this.#wakes.first(p),
      },
      log: deps.log,
    });
    this.#heartbeat = new Loop({
      name: 'run lease heartbeat',
      pass: async () => {
        await this.#renew();
        return undefined;
      },
      pollMs: this.#heartbeatMs,
      retryMs: this.#heartbeatMs,
      passAtStart: false,
      log: deps.log,
    });
    this.#cancels = new CancelWatch({
      db: deps.db,
      log: deps.log,
      active: () => [...this.#active.keys()],
      abort: (runId) => this.#active.get(runId)?.controller.abort('canceled' satisfies AbortReason),
    });
    // Usage and ends share batches: each batch is one round trip (run-writes.ts), so an end
    // rides with the usage of other runs' calls that arrive meanwhile.
    this.#outcomes = new RunOutcomes(
      deps,
      this.id,
      new RunWriteBatcher(deps.db, deps.config.worker.orgConcurrency),
    );
  }

  /** Leases are renewed three times per lease period, so one late heartbeat loses nothing. */
  get #heartbeatMs(): number {
    return Math.max(250, this.#deps.config.worker.leaseMs / 3);
  }

  async start(): Promise<void> {
    await this.#heartbeat.start();
    await this.#cancels.start();
    this.#unsignal = this.#deps.signals.on('svc_runs', (payload) => {
      if (this.#wakes.first(payload)) this.wake();
    });
    await this.#loop.start();
    this.#detachHandoff = this.#deps.runHandoff.attach(() => this.#reservePlace());
  }

  /** Asks for a claim as soon as possible (coalesced with one in progress). */
  wake(): void {
    this.#loop.wake();
  }

  /** Runs being executed here now. */
  get inFlight(): number {
    return this.#active.size;
  }

  /**
   * Stops claiming, lets in-flight runs finish for up to `graceMs`, then aborts the rest and
   * gives them back to the queue (pending, the attempt not counted) for another worker.
   */
  async stop(graceMs: number): Promise<void> {
    // The loop aborts what is still running after the grace period with 'shutdown'; leases
    // are renewed until every run here has ended.
    this.#unsignal?.();
    this.#detachHandoff?.();
    const stopped = this.#loop.stop(graceMs);
    // Runs held here have not begun: they go back to the queue at once, for another worker,
    // rather than begin during the grace period.
    for (const held of this.#ahead.all()) held.controller.abort('shutdown' satisfies AbortReason);
    await stopped;
    // Runs still in their grace period could be canceled until now.
    await this.#cancels.stop();
    await this.#heartbeat.stop();
  }

  /**
   * A place for a run that run now creates in this process claimed by this worker (RunHandoff),
   * or undefined when none is free. The place counts as taken from now on, and as work in
   * flight for stop(): a shutdown waits for the creating statement, then for the run it begins.
   */
  #reservePlace(): ReservedRunPlace | undefined {
    const { config, clock, metrics, log } = this.#deps;
    // Places a claim in flight may fill are not free: the concurrency stays a bound.
    if (this.#loop.stopping || this.#executing + this.#claiming >= config.worker.concurrency)
      return undefined;
    this.#executing++;
    this.#reserved++;
    const controller = new AbortController();
    let settle: (done: Promise<void> | undefined) => void = () => undefined;
    this.#loop.track(controller, new Promise<Promise<void> | undefined>((r) => (settle = r)));
    let settled = false;
    const giveBack = () => {
      if (settled) throw new Error('a reserved place is begun or released once');
      settled = true;
      this.#executing--;
      this.#reserved--;
    };
    return {
      claim: {
        workerId: this.id,
        now: clock.statementNow(),
        leaseMs: config.worker.leaseMs,
        limit: 1,
        orgLimit: config.worker.orgConcurrency,
      },
      begin: ({ run, context }) => {
        giveBack();
        metrics.runsClaimed.inc();
        log.debug(
          { runId: run.id, taskId: run.task_id, attempt: run.attempts },
          'run claimed at its creation',
        );
        settle(this.#begin(run, context, controller));
      },
      release: () => {
        giveBack();
        settle(undefined);
        if (this.#claimWhenReleased) {
          this.#claimWhenReleased = false;
          this.wake();
        }
      },
    };
  }

  async #claimFreeSlots(): Promise<void> {
    const { db, clock, config, metrics, log } = this.#deps;
    let yielded = false;
    for (;;) {
      if (this.#loop.stopping) return;
      this.#beginHeld();
      const places = config.worker.concurrency - this.#executing;
      // A place held for a run now may be given back: this claim is then made again.
      if (places <= 0 && this.#reserved > 0) this.#claimWhenReleased = true;
      // The free places, and while runs are short some more to hold (claim-ahead.ts).
      const free = this.#ahead.limit(places);
      if (free <= 0) return;
      // A few places freed while other runs still execute: one turn of the event loop first, so
      // that the places freed by the answers read in this turn (runs started together end
      // together) go into the same claim. A claim's cost is mostly paid per claim, not per run.
      if (!yielded && this.#executing > 0 && free < Math.min(CLAIM_TOGETHER, config.worker.concurrency)) {
        yielded = true;
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      await this.#recoverExpiredLeasesWhenDue();
      // One statement: the fair pick, the locks of its organizations, the claim with each
      // run's context (run-claim.ts).
      // Only the free places: held runs wait for places, they take none a run now could have.
      this.#claiming = Math.max(0, places);
      const claim = await claimRuns(db, {
        workerId: this.id,
        now: clock.statementNow(),
        leaseMs: config.worker.leaseMs,
        limit: free,
        orgLimit: config.worker.orgConcurrency,
      }).finally(() => {
        this.#claiming = 0;
      });
      for (const { run, context } of claim.runs) {
        metrics.runsClaimed.inc();
        // A first attempt's claim is a debug line ('run finished' says the rest): a log line is a
        // write to the log's pipe, and at hundreds of runs per second each line per run costs
        // about 4% of the worker's CPU. A takeover (attempt 2 or later) is worth an info line.
        const line = { runId: run.id, taskId: run.task_id, attempt: run.attempts };
        if (run.attempts > 1) log.info(line, 'run claimed again');
        else log.debug(line, 'run claimed');
        // Runs held before these were claimed before them, and begin first.
        if (this.#executing < config.worker.concurrency && !this.#ahead.size) this.#begin(run, context);
        else this.#hold(run, context);
      }
      // Fewer than were picked: another claim or a cancel changed the queue meanwhile.
      if (claim.runs.length < free && claim.runs.length >= claim.picked) return;
    }
  }

  /**
   * Leases are looked at once per heartbeat interval, not at every claim: a lease expires only
   * leaseMs after its last renewal, so checking more often finds nothing sooner. Recovery needs
   * no lock beyond its rows' (SKIP LOCKED): it only ever frees places under an organization's
   * limit, and it wakes every claim when it commits.
   */
  async #recoverExpiredLeasesWhenDue(): Promise<void> {
    const { db, clock } = this.#deps;
    // This process's clock decides only how often; whose lease expired is decided by the agreed one.
    const at = clock.now().getTime();
    if (at - this.#leasesCheckedAt < this.#heartbeatMs && at >= this.#leasesCheckedAt) return;
    this.#leasesCheckedAt = at;
    await db.transaction(async (tx) =>
      recoverExpiredLeases(this.#deps, tx, await clock.agreedNow(tx), [...this.#active.keys()]),
    );
  }

  /**
   * `context` undefined: the task was deleted while its run was being claimed. `heldMs`: how
   * long the run waited here since its claim (claim-ahead.ts).
   */
  #begin(
    run: RunRow,
    context: RunContextRow | undefined,
    controller = new AbortController(),
    heldMs = 0,
  ): Promise<void> {
    const timeout = setTimeout(
      () => controller.abort('timeout' satisfies AbortReason),
      this.#deps.config.worker.runTimeoutMs,
    );
    const active: ActiveRun = {
      run,
      controller,
      done: Promise.resolve(),
      executing: true,
      begunAt: performance.now(),
    };
    this.#active.set(run.id, active);
    this.#executing++;
    this.#deps.metrics.runsInFlight.set(this.#active.size);
    active.done = this.#execute(run, context, controller.signal, () => this.#executionEnded(active), heldMs)
      .catch((err) => this.#deps.log.error({ err, runId: run.id }, 'run execution crashed'))
      .finally(() => {
        clearTimeout(timeout);
        this.#executionEnded(active);
        this.#active.delete(run.id);
        this.#deps.metrics.runsInFlight.set(this.#active.size);
      })
      .then(() => this.#runLeft(run));
    this.#loop.track(controller, active.done);
    return active.done;
  }

  /**
   * Keeps a claimed run until a place frees (#beginHeld). It is the worker's from its claim: in
   * #active, so its lease is renewed and a cancel reaches it; tracked by the loop, so a
   * shutdown waits for it. Stopped while it waits (canceled, lease lost, shutdown), it leaves
   * without beginning.
   */
  #hold(run: RunRow, context: RunContextRow | undefined): void {
    const controller = new AbortController();
    let settle: (done: Promise<void>) => void = () => undefined;
    const done = new Promise<void>((resolve) => {
      settle = (d) => resolve(d);
    });
    const held: HeldRun = { run, context, controller, heldAt: performance.now(), settle };
    this.#ahead.hold(held);
    this.#active.set(run.id, { run, controller, done, executing: false, begunAt: Number.NaN });
    this.#deps.metrics.runsInFlight.set(this.#active.size);
    this.#loop.track(controller, done);
    controller.signal.addEventListener(
      'abort',
      () => {
        if (!this.#ahead.remove(held)) return; // begun meanwhile: its execution handles it
        this.#active.delete(run.id);
        this.#deps.metrics.runsInFlight.set(this.#active.size);
        const reason = controller.signal.reason as Exclude<AbortReason, 'timeout'>;
        settle(
          this.#outcomes
            .stopped(run, context, reason)
            .catch((err) => this.#deps.log.error({ err, runId: run.id }, 'a held run could not be stopped'))
            .then(() => this.#runLeft(run)),
        );
      },
      { once: true },
    );
    // Claimed by a claim that was in flight when the shutdown began: back to the queue.
    if (this.#loop.stopping) controller.abort('shutdown' satisfies AbortReason);
  }

  /** Held runs begin, oldest first, in the places that are free. */
  #beginHeld(): void {
    while (this.#executing < this.#deps.config.worker.concurrency && !this.#loop.stopping) {
      const held = this.#ahead.next();
      if (!held) return;
      held.settle(this.#begin(held.run, held.context, held.controller, performance.now() - held.heldAt));
    }
  }

  /**
   * The run has left `running` here (finished, failed, released, lost or deleted) and that is
   * committed: only now is its organization's place under SVC_ORG_CONCURRENCY free to every
   * claim. The claim made when its execution ended may have found the place still taken (the
   * lost wake-up: a claim that finds nothing is not repeated until the lease-period poll), so
   * this worker looks again, and the workers of other processes are told when the
   * organization has runs waiting for that place.
   */
  async #runLeft(run: RunRow): Promise<void> {
    // Sent once the run's end was committed (RunWriteBatcher.recordEnd).
    const told = this.#outcomes.endTold(run.id);
    if (this.#loop.stopping) return;
    this.wake();
    const { db, config, log } = this.#deps;
    if (!db.backend.shared || told) return;
    try {
      await notifyIfClaimable(db, run.organization_id, config.worker.orgConcurrency);
    } catch (err) {
      log.warn({ err, runId: run.id }, 'could not wake the other workers after a run ended');
    }
  }

  /**
   * The run's execution is over (its result may still be being recorded): its place goes to
   * the next run at once, so claiming the next run overlaps recording this one. The lease is
   * still renewed until the result is written.
   */
  #executionEnded(active: ActiveRun): void {
    if (!active.executing) return;
    active.executing = false;
    this.#executing--;
    this.#ahead.executed(performance.now() - active.begunAt);
    // A held run takes the place at once; the claim refills what is held when half has begun.
    this.#beginHeld();
    this.wake();
  }

  async #execute(
    run: RunRow,
    context: RunContextRow | undefined,
    signal: AbortSignal,
    executed: () => void,
    heldMs: number,
  ): Promise<void> {
    if (!context) return; // The task was deleted; its runs went with it.
    // The model calls this execution paid for, call by call: on the ledger at once, but those
    // after its last answer, which go with its end (RunUsage).
    const usage = new RunUsage(run, (call) => this.#outcomes.recordUsage(call, signal), this.#deps.log);
    try {
      await this.#executeAndRecord(run, context, signal, executed, usage, heldMs);
    } finally {
      // Calls still carried here never reached a written end (the run was canceled, lost or
      // released, or its end could not be written): they are written alone, being paid for.
      await usage.flush();
    }
  }

  async #executeAndRecord(
    run: RunRow,
    context: RunContextRow,
    signal: AbortSignal,
    executed: () => void,
    usage: RunUsage,
    heldMs: number,
  ): Promise<void> {
    // The claim set it (the lease's start); a run held here began that much later.
    const startedAt = run.started_at ? new Date(run.started_at.getTime() + heldMs) : this.#deps.clock.now();
    // An aborted execution may throw or return; either way the abort reason decides (RunOutcomes).
    let result: RunResult | undefined;
    // The plan's run limit was decided when the run was created (domain/run-limit.ts): a run
    // that exists is executed.
    try {
      result = await this.#executor.execute(
        {
          run,
          context,
          startedAt,
          recordUsage: (call) => usage.record(call),
          executionDone: () => {
            usage.lastAnswered();
            executed();
          },
        },
        signal,
      );
    } catch (err) {
      if (!signal.aborted) throw err;
    }
    executed();
    // Usage the executor totalled without recording it call by call is recorded now.
    if (result) await usage.recordRemainder(result);
    await this.#outcomes.record(run, context, result, signal, usage, heldMs);
  }

  async #renew(): Promise<void> {
    if (!this.#active.size) return;
    const { db, clock, config, log } = this.#deps;
    const ids = [...this.#active.keys()];
    try {
      const now = await clock.agreedNow(db);
      const held = await renewLeases(db, this.id, ids, now, config.worker.leaseMs);
      const lost = ids.filter((id) => !held.has(id));
      // A run canceled while its notification was missed is no longer held either.
      const canceled = lost.length ? await canceledAmong(db, lost) : new Set<string>();
      for (const id of lost) {
        const reason: AbortReason = canceled.has(id) ? 'canceled' : 'lease_lost';
        this.#active.get(id)?.controller.abort(reason);
      }
    } catch (err) {
      log.warn({ err }, 'lease heartbeat failed; retrying');
    }
  }
}
