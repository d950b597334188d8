import type { Queryable } from '../db.ts';
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
}

export interface DestinationRow {
  id: string;
  type: 'email' | 'sms' | 'webhook';
  value: string;
  label: string | null;
}

/** A task with its attachments, as one read returns it. */
export interface TaskWithLinks extends TaskRow {
  /** When the task's newest run was created (null before its first run). */
  latest_run_at: Date | null;
  skill_ids: string[];
  source_ids: string[];
  destinations: DestinationRow[];
}

// One round trip per read: the attachments come back as JSON arrays in their stored order.
const SELECT_WITH_LINKS = `
  SELECT t.*,
    (SELECT max(r.created_at) FROM runs r WHERE r.task_id = t.id) AS latest_run_at,
    coalesce((SELECT json_agg(x.skill_id ORDER BY x.position) FROM task_skills x WHERE x.task_id = t.id), '[]'::json) AS skill_ids,
    coalesce((SELECT json_agg(x.source_id ORDER BY x.position) FROM task_sources x WHERE x.task_id = t.id), '[]'::json) AS source_ids,
    coalesce((SELECT json_agg(json_build_object('id', d.id, 'type', d.type, 'value', d.value, 'label', d.label) ORDER BY d.position)
              FROM task_destinations d WHERE d.task_id = t.id), '[]'::json) AS destinations
  FROM tasks t`;

// Statement texts are built once: the Db seam names prepared statements by their text, and a
// text assembled on every call would be hashed and compared in full on every call.
const FIND_TASK = `${SELECT_WITH_LINKS} WHERE t.organization_id = $1 AND t.id = $2`;
const LIST_TASKS = `${SELECT_WITH_LINKS} WHERE t.organization_id = $1 ORDER BY t.created_at DESC, t.id DESC`;

export async function findTask(
  db: Queryable,
  organizationId: string,
  id: string,
): Promise<TaskWithLinks | undefined> {
  const [row] = await db.query<TaskWithLinks>(FIND_TASK, [organizationId, id]);
  return row;
}

export function listTasks(db: Queryable, organizationId: string): Promise<TaskWithLinks[]> {
  return db.query<TaskWithLinks>(LIST_TASKS, [organizationId]);
}

/** Columns a create or update may write, in the order of TASK_COLUMNS. */
export type TaskFields = Omit<TaskRow, 'id' | 'organization_id' | 'created_at' | 'last_run_at'>;

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
] as const satisfies readonly (keyof TaskFields)[];

const values = (f: TaskFields) => TASK_COLUMNS.map((c) => f[c]);

export interface NewTaskLinks {
  skillIds: readonly string[];
  sourceIds: readonly string[];
  destinations: readonly { id: string; type: string; value: string; label: string | null }[];
}

/** Why a create wrote nothing, or the task it wrote (attachments as stored: canonical ids). */
export type CreatedTask =
  | { ok: true; task: TaskWithLinks }
  | { ok: false; errorType: 'no_organization' }
  | { ok: false; errorType: 'foreign_ids'; foreign: { field: 'skillIds' | 'sourceIds'; index: number }[] }
  | { ok: false; errorType: 'tasks_limit'; plan: OrganizationRow['plan']; tasksLimit: number };

// $1–$3 and the columns come first; the links and the limits follow.
const CREATE_TASK_WITH_LINKS = (() => {
  const cols = TASK_COLUMNS.join(', ');
  const params = TASK_COLUMNS.map((_, i) => `$${i + 4}`).join(', ');
  const n = TASK_COLUMNS.length + 3;
  return `WITH foreign_ids AS (
       SELECT 'skillIds' AS field, u.ord - 1 AS index FROM unnest($${n + 1}::uuid[]) WITH ORDINALITY AS u(id, ord)
        WHERE NOT EXISTS (SELECT 1 FROM skills s WHERE s.id = u.id AND s.organization_id = $2)
       UNION ALL
       SELECT 'sourceIds', u.ord - 1 FROM unnest($${n + 2}::uuid[]) WITH ORDINALITY AS u(id, ord)
        WHERE NOT EXISTS (SELECT 1 FROM sources s WHERE s.id = u.id AND s.organization_id = $2)
     ), org AS (
       -- NO KEY UPDATE: creates queue here, but inserts referencing the organization do not.
       SELECT plan, active_tasks,
              coalesce((limit_overrides->>'tasksLimit')::int, ($${n + 7}::jsonb->>plan)::int) AS tasks_limit
         FROM organizations WHERE id = $2 FOR NO KEY UPDATE
     ), task AS (
       INSERT INTO tasks (id, organization_id, created_at, ${cols})
       SELECT $1, $2, $3, ${params} FROM org
        WHERE org.active_tasks < org.tasks_limit AND NOT EXISTS (SELECT 1 FROM foreign_ids)
       RETURNING *
     ), skills AS (
       INSERT INTO task_skills (task_id, skill_id, position)
       SELECT task.id, u.id, u.ord FROM task, unnest($${n + 1}::uuid[]) WITH ORDINALITY AS u(id, ord)
     ), sources AS (
       INSERT INTO task_sources (task_id, source_id, position)
       SELECT task.id, u.id, u.ord FROM task, unnest($${n + 2}::uuid[]) WITH ORDINALITY AS u(id, ord)
     ), destinations AS (
       INSERT INTO task_destinations (id, task_id, type, value, label, position, created_at)
       SELECT u.id, task.id, u.type, u.value, u.label, u.ord, $3
         FROM task, unnest($${n + 3}::uuid[], $${n + 4}::text[], $${n + 5}::text[], $${n + 6}::text[])
                    WITH ORDINALITY AS u(id, type, value, label, ord)
     )
     SELECT task.*, org.plan, org.tasks_limit,
            (SELECT json_agg(json_build_object('field', f.field, 'index', f.index)) FROM foreign_ids f) AS foreign_ids,
            $${n + 1}::uuid[]::text[] AS skill_ids, $${n + 2}::uuid[]::text[] AS source_ids,
            CASE WHEN task.id IS NOT NULL AND $${n + 8}::boolean THEN pg_notify('svc_tasks', '') END AS woke
       FROM (SELECT 1) AS one LEFT JOIN org ON true LEFT JOIN task ON true`;
})();

/**
 * Creates an active task with its skills, sources and destinations in ONE statement, sent on
 * its own (autocommit): it locks the organization's row, checks that every skill and source
 * is the organization's and that its active tasks (`organizations.active_tasks`, kept by
 * triggers) are under the plan's limit, writes everything and, when asked to, wakes the
 * schedulers (NOTIFY). The row lock serialises concurrent creates of one organization, so the
 * limit is exact; holding it for one statement and its commit, instead of across round trips
 * to the service, is what lets creates of one organization follow each other quickly.
 *
 * `tasksLimits` is each plan's limit; an override in `limit_overrides.tasksLimit` wins, as in
 * `effectiveLimits` (domain/plans.ts).
 */
export async function createTaskWithLinks(
  db: Queryable,
  row: { id: string; organizationId: string; createdAt: Date } & TaskFields,
  links: NewTaskLinks,
  tasksLimits: Readonly<Record<string, number>>,
  wakeSchedulers: boolean,
): Promise<CreatedTask> {
  const [result] = await db.query<
    TaskRow & {
      plan: OrganizationRow['plan'] | null;
      tasks_limit: number | null;
      foreign_ids: { field: 'skillIds' | 'sourceIds'; index: number }[] | null;
      skill_ids: string[];
      source_ids: string[];
      woke: unknown;
    }
  >(CREATE_TASK_WITH_LINKS, [
    row.id,
    row.organizationId,
    row.createdAt,
    ...values(row),
    links.skillIds,
    links.sourceIds,
    links.destinations.map((d) => d.id),
    links.destinations.map((d) => d.type),
    links.destinations.map((d) => d.value),
    links.destinations.map((d) => d.label),
    JSON.stringify(tasksLimits),
    wakeSchedulers,
  ]);
  if (!result?.plan) return { ok: false, errorType: 'no_organization' };
  if (result.foreign_ids) return { ok: false, errorType: 'foreign_ids', foreign: result.foreign_ids };
  if (!result.id)
    return { ok: false, errorType: 'tasks_limit', plan: result.plan, tasksLimit: result.tasks_limit ?? 0 };
  const { plan: _plan, tasks_limit: _limit, foreign_ids: _foreign, woke: _woke, ...task } = result;
  return {
    ok: true,
    task: {
      ...task,
      latest_run_at: null,
      destinations: links.destinations.map(({ id, type, value, label }) => ({
        id,
        type: type as DestinationRow['type'],
        value,
        label,
      })),
    },
  };
}

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

export async function deleteTask(db: Queryable, organizationId: string, id: string): Promise<boolean> {
  const rows = await db.query('DELETE FROM tasks WHERE organization_id = $1 AND id = $2 RETURNING id', [
    organizationId,
    id,
  ]);
  return rows.length > 0;
}

/** Locks the task row for the rest of the transaction (serialises concurrent edits of one task). */
export async function lockTask(db: Queryable, organizationId: string, id: string): Promise<boolean> {
  const rows = await db.query('SELECT id FROM tasks WHERE organization_id = $1 AND id = $2 FOR UPDATE', [
    organizationId,
    id,
  ]);
  return rows.length > 0;
}

/**
 * Locks the organization's row (task limits are checked under it: creates and resumptions of
 * one organization queue here) and returns its plan and active tasks, or undefined when there
 * is no such organization. NO KEY UPDATE, so inserts that reference the organization go on.
 */
export async function lockOrganizationRow(
  db: Queryable,
  organizationId: string,
): Promise<(Pick<OrganizationRow, 'plan' | 'limit_overrides'> & { active_tasks: number }) | undefined> {
  const [row] = await db.query<Pick<OrganizationRow, 'plan' | 'limit_overrides'> & { active_tasks: number }>(
    'SELECT plan, limit_overrides, active_tasks FROM organizations WHERE id = $1 FOR NO KEY UPDATE',
    [organizationId],
  );
  return row;
}

/** The subset of `ids` that are the organization's own rows of `table`. */
export async function ownedIds(
  db: Queryable,
  table: 'skills' | 'sources',
  organizationId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  // The table name comes from the closed union above, never from input.
  const sql =
    table === 'skills'
      ? 'SELECT id FROM skills WHERE organization_id = $1 AND id = ANY($2::uuid[])'
      : 'SELECT id FROM sources WHERE organization_id = $1 AND id = ANY($2::uuid[])';
  const rows = await db.query<{ id: string }>(sql, [organizationId, ids]);
  return new Set(rows.map((r) => r.id));
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

/** True when a run of the task is pending or running (overlap guard for on-demand runs). */
export async function hasRunInFlight(db: Queryable, taskId: string): Promise<boolean> {
  const rows = await db.query(
    "SELECT 1 FROM runs WHERE task_id = $1 AND status IN ('pending', 'running') LIMIT 1",
    [taskId],
  );
  return rows.length > 0;
}
