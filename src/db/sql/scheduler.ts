import { PLAN_EACH_TIME, type Queryable } from '../db.ts';
import type { TaskRow } from './tasks.ts';

/**
 * What a claim reads of a due task: its slot and schedule, its organization, its cost limit and
 * the count of its slot records. A third of a task's columns: the others (the prompt, the
 * attachments' id lists, the destinations' JSON) were read and decoded for every due task, 500
 * at a time, and went unused.
 */
const DUE_TASK_COLUMNS = [
  'id',
  'organization_id',
  'next_run_at',
  'schedule',
  'schedule_time',
  'schedule_days',
  'cron_expression',
  'timezone',
  'monthly_cost_limit_cents',
  'slot_records',
] as const satisfies readonly (keyof TaskRow)[];
export type DueTaskRow = Pick<TaskRow, (typeof DUE_TASK_COLUMNS)[number]>;

/**
 * Locks up to `limit` active tasks whose slot is due, oldest slot first. SKIP LOCKED: tasks that
 * another scheduler (or an API edit) holds are left to it, so schedulers never wait on each
 * other and never see the same task in the same instant. Ordered by the slot alone, the order
 * of tasks_due_idx, so the rows come from that index and the scan stops at `limit`: with a
 * tie-breaker (`next_run_at, id`) PostgreSQL read and sorted every due row for each batch
 * (FOR UPDATE rules out a top-N sort), 26 ms for a batch of 500 out of 10,000 due tasks
 * against 1.4 ms. Tasks due at the same instant come in no particular order.
 */
export function lockDueTasks(tx: Queryable, now: Date, limit: number): Promise<DueTaskRow[]> {
  return tx.query<DueTaskRow>(
    `${PLAN_EACH_TIME} SELECT ${DUE_TASK_COLUMNS.join(', ')} FROM tasks
      WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= $1
      ORDER BY next_run_at
      LIMIT $2
      FOR UPDATE SKIP LOCKED`,
    [now, limit],
  );
}

export interface SlotRun {
  taskId: string;
  /** The task's organization, from its row locked by the claim (the statement reads no task row). */
  organizationId: string;
  runId: string;
  slotAt: Date;
  /** The task's monthly cost limit in cents, with the start of the billing period it holds for. */
  costLimit?: { cents: number; periodStart: Date } | undefined;
}

/** Missed slots of a claim, recorded with its decisions (`slots` > 1: that many, folded). */
export interface MissedSlotRecord {
  taskId: string;
  slotAt: Date;
  slots: number;
  reason: string;
}

export interface SlotRunOutcome {
  /** The task had a run pending or running, so nothing was inserted (overlap). */
  inFlight: boolean;
  /** The task's cost in the period reached its monthly cost limit, so nothing was inserted. */
  overCostLimit: boolean;
  /** Over the cost limit, and the first time in the period: the task's destinations are to be told. */
  costLimitFirst: boolean;
  /** The organization had no run left in its billing period, so nothing was inserted. */
  overRunLimit: boolean;
  /** The inserted run's id; undefined when the task was in flight, over a limit or the slot already had a run. */
  runId: string | undefined;
}

// Built once: the Db seam names prepared statements by their text.
const INSERT_SLOT_RUNS = `WITH wanted AS (
       SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $7::numeric[], $8::timestamptz[], $15::uuid[])
         AS w(task_id, run_id, slot_at, cost_limit, period_start, organization_id)
     ), busy AS (
       SELECT DISTINCT task_id FROM runs
        WHERE task_id = ANY($1::uuid[]) AND status IN ('pending', 'running')
     ), over_budget AS (
       -- The task's cost since its period start, read in the same snapshot as busy: with no run
       -- in flight and the task's row locked, no cost of the task is still being added.
       SELECT s.* FROM (
         SELECT w.task_id, w.cost_limit, w.period_start,
                (SELECT coalesce(sum(u.cost_cents), 0) FROM usage_ledger u
                  WHERE u.task_id = w.task_id AND u.created_at >= w.period_start) AS spent
           FROM wanted w
          WHERE w.cost_limit IS NOT NULL AND NOT EXISTS (SELECT 1 FROM busy b WHERE b.task_id = w.task_id)
       ) s WHERE s.spent >= s.cost_limit
     ), eligible AS (
       SELECT w.*, row_number() OVER (PARTITION BY w.organization_id ORDER BY w.slot_at, w.task_id) AS rank
         FROM wanted w
        WHERE NOT EXISTS (SELECT 1 FROM busy b WHERE b.task_id = w.task_id)
          AND NOT EXISTS (SELECT 1 FROM over_budget o WHERE o.task_id = w.task_id)
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
       RETURNING id, organization_id, task_id, status, created_at
     ), ledger AS (
       INSERT INTO usage_ledger (run_id, organization_id, task_id, status, created_at)
       SELECT id, organization_id, task_id, status, created_at FROM run
     ), budget_first AS (
       -- Once per period: the task's row is locked by this claim, so one process records it.
       UPDATE tasks t SET cost_limit_reached_at = $4 FROM over_budget o
        WHERE t.id = o.task_id AND (t.cost_limit_reached_at IS NULL OR t.cost_limit_reached_at < o.period_start)
       RETURNING t.id
     ), decided AS (
       SELECT w.task_id, w.slot_at, run.id AS run_id,
              EXISTS (SELECT 1 FROM busy b WHERE b.task_id = w.task_id) AS in_flight,
              o.task_id IS NOT NULL AS over_budget, o.spent, o.cost_limit,
              (EXISTS (SELECT 1 FROM eligible e WHERE e.task_id = w.task_id)
               AND NOT EXISTS (SELECT 1 FROM allowed a WHERE a.task_id = w.task_id)) AS over_limit
         FROM wanted w LEFT JOIN run ON run.task_id = w.task_id
         LEFT JOIN over_budget o ON o.task_id = w.task_id
     ), record AS (
       -- One record per slot decided here (none where the slot already had a run: it has its
       -- record), and the claim's missed slots; the newest records of each task are kept.
       INSERT INTO task_slots (task_id, slot_at, outcome, run_id, slots, reason, recorded_at)
       SELECT d.task_id, d.slot_at,
              CASE WHEN d.in_flight THEN 'skipped_overlap' WHEN d.over_budget THEN 'skipped_budget'
                   WHEN d.over_limit THEN 'skipped_run_limit' ELSE 'ran' END,
              d.run_id, 1,
              CASE WHEN d.in_flight THEN 'the previous run of the task was still pending or running'
                   WHEN d.over_budget THEN 'the task''s cost in this billing period (' || d.spent
                     || ' cents) reached its monthly cost limit (' || d.cost_limit || ' cents)'
                   WHEN d.over_limit THEN 'the organization had used its plan''s runs for the billing period'
              END, $4
         FROM decided d WHERE d.in_flight OR d.over_budget OR d.over_limit OR d.run_id IS NOT NULL
       UNION ALL
       SELECT m.task_id, m.slot_at, 'missed', NULL, m.slots, m.reason, $4
         FROM unnest($9::uuid[], $10::timestamptz[], $11::int[], $12::text[]) AS m(task_id, slot_at, slots, reason)
       ON CONFLICT (task_id, slot_at) DO NOTHING
     ), pruned AS (
       -- Of the tasks in $13, keeps the newest $14 existing records beside the new ones.
       DELETE FROM task_slots s USING (
         SELECT k.task_id,
                (SELECT x.slot_at FROM task_slots x WHERE x.task_id = k.task_id
                  ORDER BY x.slot_at DESC OFFSET k.keep LIMIT 1) AS cutoff
           FROM unnest($13::uuid[], $14::int[]) AS k(task_id, keep)
       ) c
        WHERE s.task_id = c.task_id AND s.slot_at <= c.cutoff
     )
     SELECT run.id, d.task_id AS wanted_task_id, d.in_flight, d.over_budget, d.over_limit,
            EXISTS (SELECT 1 FROM budget_first f WHERE f.id = d.task_id) AS budget_first
       FROM decided d LEFT JOIN run ON run.task_id = d.task_id`;

/**
 * Decides the slots of a batch of claimed tasks in one statement, and records each decision
 * (task_slots) in the same statement: inserts the scheduled runs, each with its usage-ledger
 * row; not for a task that still has a run pending or running, nor for one whose cost in its
 * period reached its monthly cost limit (`costLimit`), nothing where the slot already has a run
 * (UNIQUE (task_id, slot_at): another scheduler got there first), and for an organization in
 * `remaining` (runs left in its period under its plan's run limit, counted under its row lock),
 * no more than that many, earliest slots first. Organizations not in `remaining` have no run
 * limit. `missed` are the claim's missed slots, recorded by the same statement; `prune`, the
 * tasks whose older records go, each with how many of its existing records stay.
 */
export async function insertSlotRuns(
  tx: Queryable,
  slots: readonly SlotRun[],
  now: Date,
  remaining: ReadonlyMap<string, number> = new Map(),
  missed: readonly MissedSlotRecord[] = [],
  prune: ReadonlyMap<string, number> = new Map(),
): Promise<Map<string, SlotRunOutcome>> {
  const rows = await tx.query<{
    id: string | null;
    wanted_task_id: string;
    in_flight: boolean;
    over_budget: boolean;
    over_limit: boolean;
    budget_first: boolean;
  }>(INSERT_SLOT_RUNS, [
    slots.map((s) => s.taskId),
    slots.map((s) => s.runId),
    slots.map((s) => s.slotAt),
    now,
    [...remaining.keys()],
    [...remaining.values()],
    slots.map((s) => s.costLimit?.cents ?? null),
    slots.map((s) => s.costLimit?.periodStart ?? null),
    missed.map((m) => m.taskId),
    missed.map((m) => m.slotAt),
    missed.map((m) => m.slots),
    missed.map((m) => m.reason),
    [...prune.keys()],
    [...prune.values()],
    slots.map((s) => s.organizationId),
  ]);
  const outcomes = new Map<string, SlotRunOutcome>();
  for (const { id, wanted_task_id, in_flight, over_budget, over_limit, budget_first } of rows) {
    outcomes.set(wanted_task_id, {
      inFlight: in_flight,
      overCostLimit: over_budget,
      costLimitFirst: budget_first,
      overRunLimit: over_limit,
      runId: id ?? undefined,
    });
  }
  return outcomes;
}

export interface TaskAdvance {
  taskId: string;
  nextRunAt: Date | null;
  /** No further slot and nothing left to run: the task becomes `completed`. */
  complete: boolean;
  /** The task's slot records after this claim, at most (unchanged when absent). */
  slotRecords?: number | undefined;
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
        updated_at = CASE WHEN v.complete THEN $4 ELSE t.updated_at END,
        slot_records = coalesce(v.slot_records, t.slot_records)
       FROM unnest($1::uuid[], $2::timestamptz[], $3::boolean[], $5::int[])
         AS v(id, next_run_at, complete, slot_records)
      WHERE t.id = v.id`,
    [
      advances.map((a) => a.taskId),
      advances.map((a) => a.nextRunAt),
      advances.map((a) => a.complete),
      now,
      advances.map((a) => a.slotRecords ?? null),
    ],
  );
}

/** The nearest slot of any active task (the scheduler sleeps until then). */
export async function nearestDueAt(db: Queryable): Promise<Date | null> {
  const [row] = await db.query<{ at: Date | null }>(
    `SELECT min(next_run_at) AS at FROM tasks WHERE status = 'active' AND next_run_at IS NOT NULL`,
  );
  return row?.at ?? null;
}
