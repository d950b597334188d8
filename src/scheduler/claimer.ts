// The due-task claimer (the scheduler role). Correctness lives in the database, not in this
// process: due tasks are claimed in batches under row locks (FOR UPDATE SKIP LOCKED), their runs
// are inserted under the UNIQUE (task_id, slot_at) constraint, and their nextRunAt is advanced
// in the same transaction. However many schedulers run, a slot gets at most one run, and a crash between
// any two statements rolls the whole claim back for another scheduler to redo.
import type { Queryable } from '../db/db.ts';
import { notify } from '../db/sql/notify.ts';
import {
  advanceTasks,
  type DueTaskRow,
  insertSlotRuns,
  lockDueTasks,
  nearestDueAt,
  type SlotRunOutcome,
} from '../db/sql/scheduler.ts';
import { type CostLimit, costLimitsOf, queueCostLimitNotice } from '../domain/cost-limit.ts';
import type { Deps } from '../domain/deps.ts';
import { lockRunAllowances, type RunAllowance, recordRunLimitReached } from '../domain/run-limit.ts';
import { newId } from '../lib/ids.ts';
import { infoLineWriter } from '../lib/logger.ts';
import { Loop } from '../lib/loop.ts';
import { scheduleSpecOf } from '../schedule/task-spec.ts';
import { MAX_SLEEP_MS } from '../schedule/wake.ts';
import { type DueSlotPlan, planDueSlot } from './due-slot.ts';
import { missedSlotRecords, recordKeeping } from './slot-records.ts';

/**
 * Tasks claimed per transaction. A batch is a fixed handful of statements whatever its size, so
 * larger batches create a burst's runs sooner (10,000 due tasks: about a quarter faster with 500
 * than with 100); the bound keeps a batch's row locks (which an API edit of one of its tasks
 * waits for) to some tens of milliseconds.
 */
const BATCH_SIZE = 500;
/** Claim transactions one tick runs at once: two keep this process and the database busy together; more would queue for the same CPUs. */
const CLAIM_LANES = 2;
export interface TickResult {
  runsCreated: number;
  missed: number;
  skippedOverlap: number;
  skippedBudget: number;
  skippedRunLimit: number;
}

export class DueTaskClaimer {
  readonly #deps: Deps;
  /** A look now, then one at each nearest slot or NOTIFY svc_tasks, at least every MAX_SLEEP_MS. */
  readonly #loop: Loop;
  /**
   * The 'run created for schedule slot' line, one per run: its members are uuids and a time,
   * none of them a credential nor text to escape, so it is written without pino's redaction
   * pass and generic formatting, like the worker's 'run finished' line (lib/logger.ts,
   * infoLineWriter). Through pino it was 28% of a scheduler's CPU in a burst of 10,000 due
   * tasks (CPU profile of the claim cycle in one process): the redaction alone 20%.
   */
  readonly #writeRunCreated: (members: string, msg: string) => void;

  constructor(deps: Deps) {
    this.#deps = deps;
    this.#writeRunCreated = infoLineWriter(deps.log);
    this.#loop = new Loop({
      name: 'scheduler',
      pass: () => this.#pass(),
      pollMs: MAX_SLEEP_MS,
      channel: { name: 'svc_tasks', listen: (c, f) => deps.db.listen(c, f) },
      log: deps.log,
    });
  }

  async start(): Promise<void> {
    await this.#loop.start();
  }

  /** Asks for a look as soon as possible (coalesced with one in progress). */
  wake(): void {
    this.#loop.wake();
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
  }

  /** Claims what is due, then sleeps until the nearest slot. */
  async #pass(): Promise<number> {
    await this.tick();
    const { db, clock } = this.#deps;
    const next = await nearestDueAt(db);
    const now = await clock.agreedNow(db);
    return next ? next.getTime() - now.getTime() : MAX_SLEEP_MS;
  }

  /**
   * Claims every due task once: creates the runs their slots get, advances their nextRunAt.
   * A burst is claimed by two transactions at a time where the database runs statements in
   * parallel: while one waits for its statements, the other plans its slots here, so neither
   * this process nor the database idles. They take disjoint batches (SKIP LOCKED), exactly as
   * schedulers in several processes do.
   */
  async tick(): Promise<TickResult> {
    const total: TickResult = {
      runsCreated: 0,
      missed: 0,
      skippedOverlap: 0,
      skippedBudget: 0,
      skippedRunLimit: 0,
    };
    const lanes = Math.min(CLAIM_LANES, this.#deps.db.backend.maxConcurrency);
    await Promise.all(Array.from({ length: lanes }, () => this.#claimUntilShort(total)));
    return total;
  }

  async #claimUntilShort(total: TickResult): Promise<void> {
    const { db, clock } = this.#deps;
    for (;;) {
      const batch = await db.transaction(async (tx) => {
        const now = await clock.agreedNow(tx);
        const tasks = await lockDueTasks(tx, now, BATCH_SIZE);
        const created = await this.#claimBatch(tx, tasks, now, total);
        if (created.length) await notify(tx, 'svc_runs');
        return { size: tasks.length, created };
      });
      // The lag ends when the runs exist for the workers: at the commit, read after it (the
      // batch's own "now" was read before its statements and would leave their time out).
      const committed = clock.now().getTime();
      for (const slot of batch.created)
        this.#deps.metrics.dispatchLag.observe((committed - slot.getTime()) / 1000);
      total.runsCreated += batch.created.length;
      if (batch.size < BATCH_SIZE) break;
    }
  }

  /**
   * A batch of locked due tasks in a handful of statements whatever its size: the slots are
   * planned here, the run limits of their organizations counted under those organizations'
   * row locks, their runs inserted by one statement and the tasks advanced by another.
   * Returns the slots of the runs it created.
   */
  async #claimBatch(tx: Queryable, tasks: DueTaskRow[], now: Date, total: TickResult): Promise<Date[]> {
    const { config } = this.#deps;
    const planned = tasks.flatMap((task) =>
      task.next_run_at
        ? [
            {
              task,
              plan: planDueSlot(
                scheduleSpecOf(task),
                task.next_run_at,
                now,
                config.scheduler.catchUpWindowMs,
              ),
            },
          ]
        : [],
    );
    // A task at its monthly cost limit gets no run either: decided (and recorded) by the same
    // statement, from each limited task's cost in its organization's current period.
    const costLimits = await costLimitsOf(
      tx,
      planned.flatMap(({ task, plan }) => (plan.runSlot ? [task] : [])),
      now,
    );
    const slots = planned.flatMap(({ task, plan }) =>
      plan.runSlot
        ? [
            {
              taskId: task.id,
              organizationId: task.organization_id,
              runId: newId(),
              slotAt: plan.runSlot,
              costLimit: costLimits.get(task.id),
            },
          ]
        : [],
    );
    const missed = planned.flatMap(({ task, plan }) =>
      missedSlotRecords(task.id, plan, config.scheduler.catchUpWindowMs),
    );
    // A slot beyond its organization's run limit gets no run; the rows of the tasks' organizations
    // that may complete are locked with them, in one id order (see lockRunAllowances).
    const allowances = await lockRunAllowances(
      tx,
      planned.flatMap(({ task, plan }) => (plan.runSlot ? [task.organization_id] : [])),
      now,
      planned.flatMap(({ task, plan }) => (plan.nextRunAt === null ? [task.organization_id] : [])),
    );
    const remaining = new Map([...allowances].map(([id, a]) => [id, a.remaining]));
    // Each task's records stay bounded: counted on its row, pruned when a claim passes the bound.
    const fresh = new Map<string, number>();
    for (const { taskId } of [...slots, ...missed]) fresh.set(taskId, (fresh.get(taskId) ?? 0) + 1);
    const keeping = new Map(
      tasks.map((task) => [task.id, recordKeeping(task.slot_records, fresh.get(task.id) ?? 0)]),
    );
    const prune = new Map(
      [...keeping].flatMap(([id, k]) => (k.keep === undefined ? [] : [[id, k.keep] as const])),
    );
    // Every slot passed gets its record in this statement: the runs, the skips and the misses.
    const inserted =
      slots.length || missed.length
        ? await insertSlotRuns(tx, slots, now, remaining, missed, prune)
        : new Map<string, SlotRunOutcome>();
    const created: Date[] = [];
    const refused = new Map<string, RunAllowance>();
    const overBudget: { task: DueTaskRow; costLimit: CostLimit }[] = [];
    const advances = planned.map(({ task, plan }) => {
      const outcome = this.#record(task, plan, inserted.get(task.id), total);
      if (outcome === 'run' && plan.runSlot) created.push(plan.runSlot);
      const allowance = allowances.get(task.organization_id);
      if (outcome === 'skipped_run_limit' && allowance) refused.set(task.organization_id, allowance);
      const costLimit = costLimits.get(task.id);
      if (inserted.get(task.id)?.costLimitFirst && costLimit) overBudget.push({ task, costLimit });
      // A task with no further slot is done once nothing more can run for it: a `once` task
      // whose run was just created completes when that run ends (the worker does it); one
      // whose only slot was missed or skipped completes now.
      return {
        taskId: task.id,
        nextRunAt: plan.nextRunAt,
        complete: plan.nextRunAt === null && outcome !== 'run',
        slotRecords: keeping.get(task.id)?.count,
      };
    });
    // Counted once per batch: a counter's labels are checked and keyed at each call.
    if (created.length) this.#deps.metrics.schedulerSlots.inc({ outcome: 'run' }, created.length);
    await advanceTasks(tx, advances, now);
    await this.#tellRunLimitReached(tx, [...refused.values()], now);
    for (const { task, costLimit } of overBudget) {
      await queueCostLimitNotice(this.#deps, tx, {
        organizationId: task.organization_id,
        taskId: task.id,
        limitCents: costLimit.cents,
        periodStart: costLimit.periodStart,
        periodEnd: costLimit.periodEnd,
        by: 'schedule',
      });
    }
    return created;
  }

  /**
   * The organization is told once per billing period that its slots are being skipped: the
   * first refusal of the period is recorded on its row (shown as `runsLimitReachedAt` in its
   * billing status) and logged; later ones, in any process, find it recorded.
   */
  async #tellRunLimitReached(tx: Queryable, refused: RunAllowance[], now: Date): Promise<void> {
    if (!refused.length) return;
    const told = new Set(await recordRunLimitReached(tx, refused, now));
    for (const a of refused) {
      if (!told.has(a.organizationId)) continue;
      this.#deps.log.warn(
        {
          organizationId: a.organizationId,
          runsLimit: a.runsLimit,
          periodStart: a.periodStart,
          periodEnd: a.periodEnd,
        },
        "organization reached its plan's run limit: its schedule slots get no runs until the period ends",
      );
    }
  }

  /** Metrics and log lines for one task's slot; returns what became of it. */
  #record(
    task: DueTaskRow,
    plan: DueSlotPlan,
    inserted: SlotRunOutcome | undefined,
    total: TickResult,
  ): 'run' | 'skipped_overlap' | 'skipped_budget' | 'skipped_run_limit' | 'none' {
    const { log, metrics } = this.#deps;
    const context = { taskId: task.id, organizationId: task.organization_id };
    if (plan.missed > 0) {
      total.missed += plan.missed;
      metrics.schedulerSlots.inc({ outcome: 'missed' }, plan.missed);
      log.warn(
        { ...context, missed: plan.missed, from: task.next_run_at, catchUpSlot: plan.runSlot },
        'schedule slots missed (outside the catch-up window or superseded by a later slot)',
      );
    }
    if (!plan.runSlot || !inserted) return 'none';
    if (inserted.inFlight) {
      total.skippedOverlap++;
      metrics.schedulerSlots.inc({ outcome: 'skipped_overlap' });
      log.warn(
        { ...context, slot: plan.runSlot },
        'schedule slot skipped: the previous run of the task is still pending or running',
      );
      return 'skipped_overlap';
    }
    if (inserted.overCostLimit) {
      total.skippedBudget++;
      metrics.schedulerSlots.inc({ outcome: 'skipped_budget' });
      log.info(
        { ...context, slot: plan.runSlot },
        "schedule slot skipped: the task's cost in the billing period reached its monthly cost limit",
      );
      return 'skipped_budget';
    }
    if (inserted.overRunLimit) {
      total.skippedRunLimit++;
      metrics.schedulerSlots.inc({ outcome: 'skipped_run_limit' });
      log.info(
        { ...context, slot: plan.runSlot },
        "schedule slot skipped: the organization has used its plan's runs for the billing period",
      );
      return 'skipped_run_limit';
    }
    // No run although the task was free: another scheduler already holds this slot; the unique
    // constraint made the insert a no-op, which is exactly "never two runs for one slot".
    if (!inserted.runId) return 'none';
    this.#writeRunCreated(
      `"taskId":"${task.id}","organizationId":"${task.organization_id}","runId":"${inserted.runId}","slot":"${plan.runSlot.toISOString()}"`,
      'run created for schedule slot',
    );
    return 'run';
  }
}
