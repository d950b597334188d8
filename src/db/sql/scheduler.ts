import { PLAN_EACH_TIME, type Queryable } from '../db.ts';
import type { RunRow } from './runs.ts';
import type { TaskRow } from './tasks.ts';

/**
 * Locks up to `limit` active tasks whose slot is due, oldest slot first. SKIP LOCKED: tasks that
 * another scheduler (or an API edit) holds are left to it, so schedulers never wait on each
 * other and never see the same task in the same instant.
 */
export function lockDueTasks(tx: Queryable, now: Date, limit: number): Promise<TaskRow[]> {
  return tx.query<TaskRow>(
    `${PLAN_EACH_TIME} SELECT * FROM tasks
      WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= $1
      ORDER BY next_run_at, id
      LIMIT $2
      FOR UPDATE SKIP LOCKED`,
    [now, limit],
  );
}

export interface SlotRun {
  taskId: string;
  runId: string;
  slotAt: Date;
}

export interface SlotRunOutcome {
  /** The task had a run pending or running, so nothing was inserted (overlap). */
  inFlight: boolean;
  /** The organization had no run left in its billing period, so nothing was inserted. */
  overRunLimit: boolean;
  /** The inserted run; undefined when the task was in flight, over the limit or the slot already had a run. */
  run: RunRow | undefined;
}

/**
 * Inserts the scheduled runs of a batch of claimed tasks in one statement, each with its
 * usage-ledger row: not for a task that still has a run pending or running, nothing where the
 * slot already has a run (UNIQUE (task_id, slot_at): another scheduler got there first), and
 * for an organization in `remaining` (runs left in its period under its plan's run limit,
 * counted under its row lock), no more than that many, earliest slots first. Organizations
 * not in `remaining` have no run limit.
 */
export async function insertSlotRuns(
  tx: Queryable,
  slots: readonly SlotRun[],
  now: Date,
  remaining: ReadonlyMap<string, number> = new Map(),
): Promise<Map<string, SlotRunOutcome>> {
  const rows = await tx.query<RunRow & { wanted_task_id: string; in_flight: boolean; over_limit: boolean }>(
    `WITH wanted AS (
       SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS w(task_id, run_id, slot_at)
     ), busy AS (
       SELECT DISTINCT task_id FROM runs
        WHERE task_id = ANY($1::uuid[]) AND status IN ('pending', 'running')
     ), eligible AS (
       SELECT w.*, t.organization_id,
              row_number() OVER (PARTITION BY t.organization_id ORDER BY w.slot_at, w.task_id) AS rank
         FROM wanted w JOIN tasks t ON t.id = w.task_id
        WHERE NOT EXISTS (SELECT 1 FROM busy b WHERE b.task_id = w.task_id)
          AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = w.task_id AND r.slot_at = w.slot_at)
     ), allowed AS (
       SELECT e.* FROM eligible e
         LEFT JOIN unnest($5::uuid[], $6::int[]) AS a(organization_id, remaining)
           ON a.organization_id = e.organization_id
        WHERE a.remaining IS NULL OR e.rank <= a.remaining
     ), run AS (
       INSERT INTO runs (id, organization_id, task_id, slot_at, trigger, status, created_at)
       SELECT run_id, organization_id, task_id, slot_at, 'schedule', 'pending', $4 FROM allowed
       ON CONFLICT (task_id, slot_at) DO NOTHING
       RETURNING *
     ), ledger AS (
       INSERT INTO usage_ledger (run_id, organization_id, task_id, status, created_at)
       SELECT id, organization_id, task_id, status, created_at FROM run
     )
     SELECT run.*, w.task_id AS wanted_task_id,
            EXISTS (SELECT 1 FROM busy b WHERE b.task_id = w.task_id) AS in_flight,
            (EXISTS (SELECT 1 FROM eligible e WHERE e.task_id = w.task_id)
             AND NOT EXISTS (SELECT 1 FROM allowed a WHERE a.task_id = w.task_id)) AS over_limit
       FROM wanted w LEFT JOIN run ON run.task_id = w.task_id`,
    [
      slots.map((s) => s.taskId),
      slots.map((s) => s.runId),
      slots.map((s) => s.slotAt),
      now,
      [...remaining.keys()],
      [...remaining.values()],
    ],
  );
  const outcomes = new Map<string, SlotRunOutcome>();
  for (const { wanted_task_id, in_flight, over_limit, ...run } of rows) {
    outcomes.set(wanted_task_id, {
      inFlight: in_flight,
      overRunLimit: over_limit,
      run: run.id ? run : undefined,
    });
  }
  return outcomes;
}

export interface TaskAdvance {
  taskId: string;
  nextRunAt: Date | null;
  /** No further slot and nothing left to run: the task becomes `completed`. */
  complete: boolean;
}

/** Moves a batch of claimed tasks to their next slots, in one statement. */
export async function advanceTasks(
  tx: Queryable,
  advances: readonly TaskAdvance[],
  now: Date,
): Promise<void> {
  if (!advances.length) return;
  const completing = advances.filter((a) => a.complete).map((a) => a.taskId);
  if (completing.length) {
    // A completed task leaves its organization's active-task count (a trigger updates the
    // organization's row). Taking those rows first, in id order, keeps two batches that
    // complete tasks of the same organizations from locking them in opposite orders.
    await tx.query(
      `SELECT 1 FROM organizations
        WHERE id IN (SELECT organization_id FROM tasks WHERE id = ANY($1::uuid[]))
        ORDER BY id FOR NO KEY UPDATE`,
      [completing],
    );
  }
  await tx.query(
    `UPDATE tasks t SET next_run_at = v.next_run_at,
        status = CASE WHEN v.complete THEN 'completed' ELSE t.status END,
        updated_at = CASE WHEN v.complete THEN $4 ELSE t.updated_at END
       FROM unnest($1::uuid[], $2::timestamptz[], $3::boolean[]) AS v(id, next_run_at, complete)
      WHERE t.id = v.id`,
    [advances.map((a) => a.taskId), advances.map((a) => a.nextRunAt), advances.map((a) => a.complete), now],
  );
}

/** The nearest slot of any active task (the scheduler sleeps until then). */
export async function nearestDueAt(db: Queryable): Promise<Date | null> {
  const [row] = await db.query<{ at: Date | null }>(
    `SELECT min(next_run_at) AS at FROM tasks WHERE status = 'active' AND next_run_at IS NOT NULL`,
  );
  return row?.at ?? null;
}
