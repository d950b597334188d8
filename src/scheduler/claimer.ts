// The due-task claimer (the scheduler role). Correctness lives in the database, not in this
// process: a due task is claimed under a row lock (FOR UPDATE SKIP LOCKED), its run is inserted
// under the UNIQUE (task_id, slot_at) constraint, and its nextRunAt is advanced in the same
// transaction. However many schedulers run, a slot gets at most one run, and a crash between
// any two statements rolls the whole claim back for another scheduler to redo.
import type { Queryable } from '../db/db.ts';
import { insertRunIfSlotFree } from '../db/sql/runs.ts';
import { advanceTask, lockDueTasks, nearestDueAt } from '../db/sql/scheduler.ts';
import { hasRunInFlight, type TaskRow } from '../db/sql/tasks.ts';
import { currentTime, notify } from '../db/sql/time.ts';
import type { Deps } from '../domain/deps.ts';
import { CoalescedTask } from '../lib/coalesced-task.ts';
import { newId } from '../lib/ids.ts';
import { planDueSlot } from './due-slot.ts';
import { scheduleSpecOf } from './task-spec.ts';

/** Tasks claimed per transaction: short transactions, so row locks are held briefly. */
const BATCH_SIZE = 100;
/**
 * The longest sleep between looks. Wake-ups come from the nearest slot's timer and from
 * NOTIFY svc_tasks; this bound only limits the damage of a notification that never arrives.
 */
const MAX_SLEEP_MS = 60_000;

export interface TickResult {
  runsCreated: number;
  missed: number;
  skippedOverlap: number;
}

type SlotOutcome = { kind: 'run'; slot: Date } | { kind: 'skipped_overlap'; slot: Date } | { kind: 'none' };

export class DueTaskClaimer {
  readonly #deps: Deps;
  #timer: NodeJS.Timeout | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  readonly #passes = new CoalescedTask(() => this.#pass());
  #stopped = false;

  constructor(deps: Deps) {
    this.#deps = deps;
  }

  /** Starts the loop: a look now, then one at each nearest slot or notification. */
  async start(): Promise<void> {
    this.#unlisten = await this.#deps.db.listen('svc_tasks', () => this.wake());
    this.wake();
  }

  /** Asks for a look as soon as possible (coalesced with one in progress). */
  wake(): void {
    this.#passes.request();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#unlisten?.();
    await this.#passes.stop();
  }

  async #pass(): Promise<void> {
    try {
      await this.tick();
      await this.#sleepUntilNextSlot();
    } catch (err) {
      this.#deps.log.error({ err }, 'scheduler tick failed; retrying');
      this.#arm(5_000);
    }
  }

  async #sleepUntilNextSlot(): Promise<void> {
    const { db, clock } = this.#deps;
    const next = await nearestDueAt(db);
    const now = await currentTime(db, clock);
    const delay = next ? next.getTime() - now.getTime() : MAX_SLEEP_MS;
    this.#arm(Math.max(0, Math.min(delay, MAX_SLEEP_MS)));
  }

  #arm(ms: number): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.wake(), ms);
    this.#timer.unref();
  }

  /** Claims every due task once: creates the runs their slots get, advances their nextRunAt. */
  async tick(): Promise<TickResult> {
    const total: TickResult = { runsCreated: 0, missed: 0, skippedOverlap: 0 };
    const { db, clock } = this.#deps;
    for (;;) {
      const batch = await db.transaction(async (tx) => {
        const now = await currentTime(tx, clock);
        const tasks = await lockDueTasks(tx, now, BATCH_SIZE);
        let created = 0;
        for (const task of tasks) {
          const outcome = await this.#claimTask(tx, task, now, total);
          if (outcome.kind === 'run') created++;
        }
        if (created) await notify(tx, 'svc_runs');
        return { size: tasks.length, created, now };
      });
      total.runsCreated += batch.created;
      if (batch.size < BATCH_SIZE) break;
    }
    return total;
  }

  async #claimTask(tx: Queryable, task: TaskRow, now: Date, total: TickResult): Promise<SlotOutcome> {
    const { config, log, metrics } = this.#deps;
    if (!task.next_run_at) return { kind: 'none' };
    const plan = planDueSlot(scheduleSpecOf(task), task.next_run_at, now, config.scheduler.catchUpWindowMs);
    const context = { taskId: task.id, organizationId: task.organization_id };

    if (plan.missed > 0) {
      total.missed += plan.missed;
      metrics.schedulerSlots.inc({ outcome: 'missed' }, plan.missed);
      log.warn(
        { ...context, missed: plan.missed, from: task.next_run_at, catchUpSlot: plan.runSlot },
        'schedule slots missed (outside the catch-up window or superseded by a later slot)',
      );
    }

    let outcome: SlotOutcome = { kind: 'none' };
    if (plan.runSlot) {
      if (await hasRunInFlight(tx, task.id)) {
        outcome = { kind: 'skipped_overlap', slot: plan.runSlot };
        total.skippedOverlap++;
        metrics.schedulerSlots.inc({ outcome: 'skipped_overlap' });
        log.warn(
          { ...context, slot: plan.runSlot },
          'schedule slot skipped: the previous run of the task is still pending or running',
        );
      } else {
        const run = await insertRunIfSlotFree(tx, {
          id: newId(),
          organizationId: task.organization_id,
          taskId: task.id,
          slotAt: plan.runSlot,
          trigger: 'schedule',
          now,
        });
        // A run already holding this slot means another scheduler got there first; the unique
        // constraint made this insert a no-op, which is exactly "never two runs for one slot".
        if (run) {
          outcome = { kind: 'run', slot: plan.runSlot };
          metrics.schedulerSlots.inc({ outcome: 'run' });
          metrics.dispatchLag.observe((now.getTime() - plan.runSlot.getTime()) / 1000);
          log.info({ ...context, runId: run.id, slot: plan.runSlot }, 'run created for schedule slot');
        }
      }
    }

    // A task with no further slot is done once nothing more can run for it: a `once` task whose
    // run was just created completes when that run ends (the worker does it); one whose only
    // slot was missed or skipped completes now.
    const finished = plan.nextRunAt === null && outcome.kind !== 'run';
    await advanceTask(tx, task.id, plan.nextRunAt, finished, now);
    return outcome;
  }
}
