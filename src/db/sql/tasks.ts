import { type Queryable, REUSE_ROWS } from '../db.ts';
import type { OrganizationRow } from './organizations.ts';

export interface TaskRow {
  id: string;
  organization_id: string;
  name: string;
  prompt: string;
  model: string;
  schedule: 'once' | 'hourly' | 'daily' | 'weekly';
  status: 'active' | 'paused' | 'completed';
  cron_expression: string | null;
  schedule_time: string | null;
  schedule_days: string[] | null;
  timezone: string;
  delivery_email: boolean | null;
  delivery_email_address: string | null;
  delivery_sms: boolean | null;
  delivery_phone_number: string | null;
  user_id: string | null;
  next_run_at: Date | null;
  last_run_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** The run checks (migration 0016): a cost cap, an output JSON Schema, required tools. */
  max_cost_cents_per_run: number | null;
  output_schema: Record<string, unknown> | null;
  required_tools: string[] | null;
  /** Consecutive failed runs that pause the task (0: never); what its runs are delivered on. */
  auto_pause_after_failures: number;
  deliver_on: 'always' | 'change' | 'failure';
  /** Kept by the statement that records a run's end (run-queue.ts); cleared on resuming. */
  consecutive_failures: number;
  paused_reason: string | null;
  last_delivered_run_id: string | null;
  /** Cents per billing period (null: no limit). */
  monthly_cost_limit_cents: number | null;
  /** When the cost limit first held in a period (scheduler or run now, under the task's lock). */
  cost_limit_reached_at: Date | null;
  /** At least the number of the task's slot records (the scheduler's, see scheduler/slot-records.ts). */
  slot_records: number;
}

export interface DestinationRow {
  id: string;
  type: 'email' | 'sms' | 'webhook';
  value: string;
  label: string | null;
}

/**
 * A task with its attachments, as one read returns it. The attachments are copies kept on the
 * task's row (migration 0019: its triggers keep them equal to the link tables at the end of
 * every statement that changes a link), so a read touches no other table for them.
 */
export interface TaskWithLinks extends TaskRow {
  /** When the task's newest run was created (null before its first run). */
  latest_run_at: Date | null;
  /** In their stored order. */
  skill_ids: string[];
  source_ids: string[];
  destinations: DestinationRow[];
}

// One round trip per read, one row per task: the attachments are columns of the task's row
// (arrays of ids and the destinations, as JSON). Three sub-selects per task used to read them
// from the link tables: on PostgreSQL more than half of the database's time for a 20-task list.
// Tasks are read far more often than they change (clients poll them): their rows are reused
// (REUSE_ROWS), and an unchanged task's view, JSON and entity tag are worked out once.
export const SELECT_WITH_LINKS = `${REUSE_ROWS}
  SELECT t.*,
    (SELECT max(r.created_at) FROM runs r WHERE r.task_id = t.id) AS latest_run_at
  FROM tasks t`;

// Statement texts are built once: the Db seam names prepared statements by their text, and a
// text assembled on every call would be hashed and compared in full on every call.
const FIND_TASK = `${SELECT_WITH_LINKS} WHERE t.organization_id = $1 AND t.id = $2`;
// The organization's tasks through svc_organization_tasks (migration 0022): planned once, not
// for each organization's size at each request.
const LIST_TASKS = `${SELECT_WITH_LINKS.replace('FROM tasks t', 'FROM svc_organization_tasks($1) t')}
  ORDER BY t.created_at DESC, t.id DESC`;

export async function findTask(
  db: Queryable,
  organizationId: string,
  id: string,
): Promise<Readonly<TaskWithLinks> | undefined> {
  const [row] = await db.query<TaskWithLinks>(FIND_TASK, [organizationId, id]);
  return row;
}

export function listTasks(db: Queryable, organizationId: string): Promise<Readonly<TaskWithLinks>[]> {
  return db.query<TaskWithLinks>(LIST_TASKS, [organizationId]);
}

/** A task's failure and delivery settings (autoPauseAfterFailures, deliverOn). */
export type TaskSettings = Pick<TaskRow, 'auto_pause_after_failures' | 'deliver_on'>;
/** The settings of a task created without them (as the columns' defaults, migration 0015). */
export const TASK_SETTING_DEFAULTS: TaskSettings = { auto_pause_after_failures: 5, deliver_on: 'always' };

/** Columns a create or update may write, in the order of TASK_COLUMNS. */
export type TaskFields = Omit<
  TaskRow,
  | 'id'
  | 'organization_id'
  | 'created_at'
  | 'last_run_at'
  | 'consecutive_failures'
  | 'paused_reason'
  | 'last_delivered_run_id'
  | 'cost_limit_reached_at'
  | 'slot_records'
>;

const TASK_COLUMNS = [
  'name',
  'prompt',
  'model',
  'schedule',
  'status',
  'cron_expression',
  'schedule_time',
  'schedule_days',
  'timezone',
  'delivery_email',
  'delivery_email_address',
  'delivery_sms',
  'delivery_phone_number',
  'user_id',
  'next_run_at',
  'updated_at',
  'max_cost_cents_per_run',
  'output_schema',
  'required_tools',
  'auto_pause_after_failures',
  'deliver_on',
  'monthly_cost_limit_cents',
] as const satisfies readonly (keyof TaskFields)[];

/** jsonb columns travel as JSON text (the drivers would send a JavaScript array as a PostgreSQL array). */
export const jsonParam = (value: unknown) => (value === null ? null : JSON.stringify(value));
const JSON_COLUMNS: ReadonlySet<string> = new Set(['output_schema', 'required_tools']);
const values = (f: TaskFields) => TASK_COLUMNS.map((c) => (JSON_COLUMNS.has(c) ? jsonParam(f[c]) : f[c]));

const UPDATE_TASK = `UPDATE tasks SET ${TASK_COLUMNS.map((c, i) => `${c} = $${i + 3}`).join(', ')}
  WHERE organization_id = $1 AND id = $2`;

/** Writes every updatable column (the caller merges the patch into the current row). */
export async function updateTask(
  db: Queryable,
  organizationId: string,
  id: string,
  fields: TaskFields,
): Promise<void> {
  await db.query(UPDATE_TASK, [organizationId, id, ...values(fields)]);
}

/**
 * The task's runs in flight, locked as its delete's cascade will take them, in id order ($1:
 * organization, $2: task). A worker's write batch locks the runs it ends and then their tasks
 * (lockRunsAndTasksStatement): a delete that took the task's row first and then its runs (by
 * cascade) deadlocked with a batch holding one of them, one of the two failing after the deadlock
 * timeout. Taken first, the delete waits for the batch instead. Ended runs are not locked: no
 * writer takes an ended run and then its task.
 */
const LOCK_RUNS_IN_FLIGHT = `SELECT id FROM runs
        WHERE task_id = $2 AND organization_id = $1 AND status IN ('pending', 'running')
        ORDER BY id FOR UPDATE`;

/** Locks the task's runs in flight (see LOCK_RUNS_IN_FLIGHT), before a delete takes the task's row. */
export async function lockTaskRunsInFlight(db: Queryable, organizationId: string, id: string): Promise<void> {
  await db.query(LOCK_RUNS_IN_FLIGHT, [organizationId, id]);
}

/**
 * Deletes the task (its runs go with it). Returns undefined when there was no such task, else
 * whether a run of it was running: deleting that run frees a place under the organization's
 * concurrency limit. (The statement's snapshot still shows the runs the cascade deletes.)
 */
export async function deleteTask(
  db: Queryable,
  organizationId: string,
  id: string,
): Promise<{ hadRunning: boolean } | undefined> {
  const [row] = await db.query<{ had_running: boolean }>(
    `WITH held AS (${LOCK_RUNS_IN_FLIGHT}),
     gone AS (
       DELETE FROM tasks WHERE organization_id = $1 AND id = $2
          -- Evaluated once, before the task's row is taken: its runs in flight are taken first.
          AND (SELECT count(*) FROM held) >= 0
       RETURNING id
     )
     SELECT EXISTS (SELECT 1 FROM runs r JOIN gone ON r.task_id = gone.id WHERE r.status = 'running') AS had_running
       FROM gone`,
    [organizationId, id],
  );
  return row && { hadRunning: row.had_running };
}

/** Locks the task row for the rest of the transaction (serialises concurrent edits of one task). */
export const LOCK_TASK_SQL = 'SELECT id FROM tasks WHERE organization_id = $1 AND id = $2 FOR UPDATE';

export async function lockTask(db: Queryable, organizationId: string, id: string): Promise<boolean> {
  const rows = await db.query(LOCK_TASK_SQL, [organizationId, id]);
  return rows.length > 0;
}

/**
 * Locks the organization's row (the service's caps are checked under it, as the tasks limit is:
 * changes of one organization queue here) and returns its plan and totals, or undefined when
 * there is no such organization. NO KEY UPDATE, so inserts that reference the organization go on.
 */
export async function lockOrganizationRow(
  db: Queryable,
  organizationId: string,
): Promise<OrganizationTotals | undefined> {
  const [row] = await db.query<OrganizationTotals>(
    `SELECT plan, limit_overrides, active_tasks, total_tasks, task_prompt_bytes, total_destinations
       FROM organizations WHERE id = $1 FOR NO KEY UPDATE`,
    [organizationId],
  );
  return row;
}

/** An organization's plan and the totals its triggers keep (migrations 0008 and 0010). */
export interface OrganizationTotals extends Pick<OrganizationRow, 'plan' | 'limit_overrides'> {
  active_tasks: number;
  total_tasks: number;
  task_prompt_bytes: number;
  total_destinations: number;
}

export async function replaceTaskSkills(
  db: Queryable,
  taskId: string,
  skillIds: readonly string[],
): Promise<void> {
  await db.query('DELETE FROM task_skills WHERE task_id = $1', [taskId]);
  if (skillIds.length) {
    await db.query(
      'INSERT INTO task_skills (task_id, skill_id, position) SELECT $1, id, ord FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, ord)',
      [taskId, skillIds],
    );
  }
}

export async function replaceTaskSources(
  db: Queryable,
  taskId: string,
  sourceIds: readonly string[],
): Promise<void> {
  await db.query('DELETE FROM task_sources WHERE task_id = $1', [taskId]);
  if (sourceIds.length) {
    await db.query(
      'INSERT INTO task_sources (task_id, source_id, position) SELECT $1, id, ord FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, ord)',
      [taskId, sourceIds],
    );
  }
}

export async function replaceTaskDestinations(
  db: Queryable,
  taskId: string,
  destinations: readonly { id: string; type: string; value: string; label: string | null }[],
  now: Date,
): Promise<void> {
  await db.query('DELETE FROM task_destinations WHERE task_id = $1', [taskId]);
  for (const [i, d] of destinations.entries()) {
    await insertDestination(db, taskId, { ...d, position: i + 1 }, now);
  }
}

export async function insertDestination(
  db: Queryable,
  taskId: string,
  d: { id: string; type: string; value: string; label: string | null; position?: number },
  now: Date,
): Promise<DestinationRow> {
  const [row] = await db.query<DestinationRow>(
    `INSERT INTO task_destinations (id, task_id, type, value, label, position, created_at)
     VALUES ($1, $2, $3, $4, $5,
       coalesce($6, (SELECT coalesce(max(position), 0) + 1 FROM task_destinations WHERE task_id = $2)), $7)
     RETURNING id, type, value, label`,
    [d.id, taskId, d.type, d.value, d.label, d.position ?? null, now],
  );
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function updateDestination(
  db: Queryable,
  taskId: string,
  id: string,
  d: { type: string; value: string; label: string | null },
): Promise<DestinationRow | undefined> {
  const [row] = await db.query<DestinationRow>(
    'UPDATE task_destinations SET type = $3, value = $4, label = $5 WHERE task_id = $1 AND id = $2 RETURNING id, type, value, label',
    [taskId, id, d.type, d.value, d.label],
  );
  return row;
}

export async function deleteDestination(db: Queryable, taskId: string, id: string): Promise<boolean> {
  const rows = await db.query('DELETE FROM task_destinations WHERE task_id = $1 AND id = $2 RETURNING id', [
    taskId,
    id,
  ]);
  return rows.length > 0;
}

/** Resuming a task starts its count of failed runs afresh and drops the reason it paused itself. */
export async function clearAutoPause(db: Queryable, id: string): Promise<void> {
  await db.query('UPDATE tasks SET consecutive_failures = 0, paused_reason = NULL WHERE id = $1', [id]);
}

/**
 * A task switched to deliverOn `change` compares its next output with the last completed run
 * that was sent out (its deliveries queued, not suppressed), whatever deliverOn was then: the
 * run-end statement keeps that run only for `change` tasks, sparing the others a write.
 */
export async function setLastDeliveredRun(db: Queryable, id: string): Promise<void> {
  await db.query(
    `UPDATE tasks SET last_delivered_run_id = (
       SELECT r.id FROM runs r
        WHERE r.task_id = $1 AND r.status = 'completed' AND r.delivery_status IS NOT NULL
        ORDER BY r.completed_at DESC, r.id DESC LIMIT 1)
      WHERE id = $1`,
    [id],
  );
}
