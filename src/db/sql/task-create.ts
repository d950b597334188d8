import type { Queryable } from '../db.ts';
import type { OrganizationRow } from './organizations.ts';
import {
  type DestinationRow,
  TASK_SETTING_DEFAULTS,
  type TaskFields,
  type TaskRow,
  type TaskSettings,
  type TaskWithLinks,
} from './tasks.ts';

export interface NewTaskLinks {
  skillIds: readonly string[];
  sourceIds: readonly string[];
  destinations: readonly { id: string; type: string; value: string; label: string | null }[];
}

/** One task to create: its row, its attachments, and whether its first slot must wake the schedulers. */
export interface NewTask {
  /** The failure and delivery settings default to the columns' defaults. */
  row: { id: string; organizationId: string; createdAt: Date } & Omit<TaskFields, keyof TaskSettings> &
    Partial<TaskSettings>;
  links: NewTaskLinks;
  wakeSchedulers: boolean;
}

/** Why a create wrote nothing, or the task it wrote (attachments as stored: canonical ids). */
export type CreatedTask =
  | { ok: true; task: TaskWithLinks }
  | { ok: false; errorType: 'no_organization' }
  | { ok: false; errorType: 'foreign_ids'; foreign: ForeignLink[] }
  | { ok: false; errorType: 'tasks_limit'; plan: OrganizationRow['plan']; tasksLimit: number }
  | { ok: false; errorType: 'org_cap'; cap: OrgTaskCap };

/** The service's caps on one organization's tasks, whatever its plan (config.orgCaps). */
export interface OrgTaskCaps {
  /** Tasks of any status. */
  tasks: number;
  /** UTF-8 bytes of all the prompts. */
  taskPromptBytes: number;
  /** Destinations over all the tasks. */
  destinations: number;
}
export type OrgTaskCap = keyof OrgTaskCaps;

// The two rules that a task's create and its later changes share, written once, here: the
// batched create (CREATE_TASKS) and the checks of a single change (below) are built from them.

/** The organization's tasks limit: its override when set, else its plan's (`limits`: plan -> limit). */
const tasksLimitOf = (org: string, limits: string) =>
  `coalesce((${org}.limit_overrides->>'tasksLimit')::int, (${limits}::jsonb->>${org}.plan)::int)`;

/** Whether `adding` more active tasks would take the organization past its tasks limit. */
const overTasksLimit = (org: string, adding: string, limits: string) =>
  `${org}.active_tasks + ${adding} > ${tasksLimitOf(org, limits)}`;

/** Whether `id` is not one of the organization's rows of `table` (another's skill or source). */
const notOwned = (table: 'skills' | 'sources', id: string, organization: string) =>
  `NOT EXISTS (SELECT 1 FROM ${table} k WHERE k.id = ${id} AND k.organization_id = ${organization})`;

/** A skill or source id that is not the organization's: its list and its index in the list. */
export interface ForeignLink {
  field: 'skillIds' | 'sourceIds';
  index: number;
}

const LOCK_TASKS_LIMIT = `
  SELECT o.plan, ${tasksLimitOf('o', '$3')} AS tasks_limit, ${overTasksLimit('o', '$2::int', '$3')} AS refused
    FROM organizations o WHERE o.id = $1 FOR NO KEY UPDATE`;

/**
 * Locks the organization's row (creates and resumptions of one organization queue on it, so
 * the count is exact) and tells whether `adding` more active tasks would pass its tasks limit.
 * Undefined when there is no such organization. `tasksLimits` is each plan's limit.
 */
export async function lockTasksLimit(
  db: Queryable,
  organizationId: string,
  adding: number,
  tasksLimits: Readonly<Record<string, number>>,
): Promise<{ plan: OrganizationRow['plan']; tasksLimit: number; refused: boolean } | undefined> {
  const [row] = await db.query<{ plan: OrganizationRow['plan']; tasks_limit: number; refused: boolean }>(
    LOCK_TASKS_LIMIT,
    [organizationId, adding, JSON.stringify(tasksLimits)],
  );
  return row && { plan: row.plan, tasksLimit: row.tasks_limit, refused: row.refused };
}

const FOREIGN_LINKS = `
  SELECT 'skillIds' AS field, (u.ord - 1)::int AS index
    FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, ord) WHERE ${notOwned('skills', 'u.id', '$1')}
  UNION ALL
  SELECT 'sourceIds', (u.ord - 1)::int
    FROM unnest($3::uuid[]) WITH ORDINALITY AS u(id, ord) WHERE ${notOwned('sources', 'u.id', '$1')}`;

/** The skills and sources of `links` that are not the organization's (for a task's change). */
export async function foreignLinks(
  db: Queryable,
  organizationId: string,
  links: { skillIds?: readonly string[] | undefined; sourceIds?: readonly string[] | undefined },
): Promise<ForeignLink[]> {
  return db.query<ForeignLink>(FOREIGN_LINKS, [organizationId, links.skillIds ?? [], links.sourceIds ?? []]);
}

/**
 * Creates active tasks with their skills, sources and destinations, for one organization or
 * several, in ONE statement sent on its own (autocommit). For each organization it locks the
 * row (in id order, so that concurrent statements cannot deadlock), checks that every skill
 * and source of each task is the organization's, and accepts tasks in input order while its
 * active tasks (`organizations.active_tasks`, kept by triggers) stay within the plan's limit.
 * It then writes what it accepted and, when one of them asks to, wakes the schedulers (NOTIFY).
 *
 * The same goes for the service's caps (`caps`): tasks of any status, prompt bytes and
 * destinations, counted on the organization's row too. Within one statement the caps are
 * applied to the running totals in input order, so a task refused for its size also holds
 * back the ones after it in that statement: the caps are never exceeded, at worst a batch
 * that reaches one refuses slightly early.
 *
 * The row lock serialises creates of one organization, so the limit is exact. The lock lasts
 * the statement and its commit (a WAL flush); creating several tasks in one statement is what
 * lets many creates share one lock and one flush.
 *
 * Every input gets a result, in input order. `tasksLimits` is each plan's limit; an override in
 * `limit_overrides.tasksLimit` wins, as in `effectiveLimits` (domain/plans.ts).
 */
export async function createTasks(
  db: Queryable,
  tasks: readonly NewTask[],
  tasksLimits: Readonly<Record<string, number>>,
  caps: OrgTaskCaps,
): Promise<CreatedTask[]> {
  // The attachments, flattened: each one names its task by its 1-based place in the input.
  const skills = tasks.flatMap((t, i) => t.links.skillIds.map((id) => ({ item: i + 1, id })));
  const sources = tasks.flatMap((t, i) => t.links.sourceIds.map((id) => ({ item: i + 1, id })));
  const destinations = tasks.flatMap((t, i) => t.links.destinations.map((d) => ({ item: i + 1, ...d })));
  // The tasks as one JSON text (JSON.stringify writes Dates as ISO text): the driver's own
  // conversion of one array per column escaped every element in JS (measured in a profile of
  // creates: 7.4 us per create for the arrays, against about 1 us for the JSON).
  const input = JSON.stringify(
    tasks.map((t) => {
      const r = t.row;
      return {
        id: r.id,
        organization_id: r.organizationId,
        created_at: r.createdAt,
        name: r.name,
        prompt: r.prompt,
        model: r.model,
        schedule: r.schedule,
        status: r.status,
        cron_expression: r.cron_expression,
        schedule_time: r.schedule_time,
        // Weekday names have no commas: each task's days travel as one comma-separated text.
        schedule_days: r.schedule_days === null ? null : r.schedule_days.join(','),
        timezone: r.timezone,
        delivery_email: r.delivery_email,
        delivery_email_address: r.delivery_email_address,
        delivery_sms: r.delivery_sms,
        delivery_phone_number: r.delivery_phone_number,
        user_id: r.user_id,
        next_run_at: r.next_run_at,
        updated_at: r.updated_at,
        wake: t.wakeSchedulers,
        monthly_cost_limit_cents: r.monthly_cost_limit_cents,
        max_cost_cents_per_run: r.max_cost_cents_per_run,
        output_schema: r.output_schema,
        required_tools: r.required_tools,
        auto_pause_after_failures:
          r.auto_pause_after_failures ?? TASK_SETTING_DEFAULTS.auto_pause_after_failures,
        deliver_on: r.deliver_on ?? TASK_SETTING_DEFAULTS.deliver_on,
      };
    }),
  );
  const limitsAndCaps = [
    JSON.stringify(tasksLimits),
    JSON.stringify({
      tasks: caps.tasks,
      taskPromptBytes: caps.taskPromptBytes,
      destinations: caps.destinations,
    }),
  ];
  const results =
    skills.length + sources.length + destinations.length === 0
      ? await db.query<CreateResultRow>(CREATE_TASKS_WITHOUT_LINKS, [input, ...limitsAndCaps])
      : await db.query<CreateResultRow>(CREATE_TASKS, [
          input,
          skills.map((s) => s.item),
          skills.map((s) => s.id),
          sources.map((s) => s.item),
          sources.map((s) => s.id),
          destinations.map((d) => d.item),
          destinations.map((d) => d.id),
          destinations.map((d) => d.type),
          destinations.map((d) => d.value),
          destinations.map((d) => d.label),
          ...limitsAndCaps,
        ]);
  return tasks.map((t, i) => resultOf(t, results[i]));
}

interface CreateResultRow extends Omit<TaskRow, 'id'> {
  /** Null when the task was not written. */
  id: string | null;
  plan: OrganizationRow['plan'] | null;
  tasks_limit: number | null;
  foreign_ids: ForeignLink[] | null;
  refusal: 'tasks_limit' | OrgTaskCap | null;
  skill_ids: string[];
  source_ids: string[];
  woke: unknown;
}

function resultOf(input: NewTask, result: CreateResultRow | undefined): CreatedTask {
  if (!result?.plan) return { ok: false, errorType: 'no_organization' };
  if (result.foreign_ids) return { ok: false, errorType: 'foreign_ids', foreign: result.foreign_ids };
  if (!result.id) {
    if (result.refusal && result.refusal !== 'tasks_limit')
      return { ok: false, errorType: 'org_cap', cap: result.refusal };
    return { ok: false, errorType: 'tasks_limit', plan: result.plan, tasksLimit: result.tasks_limit ?? 0 };
  }
  const {
    plan: _plan,
    tasks_limit: _limit,
    foreign_ids: _foreign,
    refusal: _refusal,
    woke: _woke,
    id,
    ...task
  } = result;
  return {
    ok: true,
    task: {
      ...task,
      id,
      latest_run_at: null,
      destinations: input.links.destinations.map(({ id, type, value, label }) => ({
        id,
        type: type as DestinationRow['type'],
        value,
        label,
      })),
    },
  };
}

/**
 * The create statement, in two forms built once each (the Db seam names prepared statements by
 * their text): `withLinks` for batches where a task has skills, sources or destinations, and
 * without them for the others. A batch without attachments then pays for none of their parts
 * (measured alone on PostgreSQL, one task per statement: 0.48 ms of the backend's CPU against
 * 0.76 for the full form, which starts up its plan's attachment nodes even when they are empty).
 *
 * Parameters: $1 the tasks, one JSON object each, in input order (its keys the columns of
 * `input`); with links, $2–$10 the attachments, flattened; then the plans' limits and the
 * service's caps ($11, $12 with links; $2, $3 without).
 */
function createTasksStatement(withLinks: boolean): string {
  const limits = withLinks ? '$11' : '$2';
  const caps = withLinks ? '$12' : '$3';
  const linkInputs = `
  ), skills_in AS MATERIALIZED (
    SELECT u.item, u.id, row_number() OVER (PARTITION BY u.item ORDER BY u.ord) AS position
      FROM unnest($2::int[], $3::uuid[]) WITH ORDINALITY AS u(item, id, ord)
  ), sources_in AS MATERIALIZED (
    SELECT u.item, u.id, row_number() OVER (PARTITION BY u.item ORDER BY u.ord) AS position
      FROM unnest($4::int[], $5::uuid[]) WITH ORDINALITY AS u(item, id, ord)
  ), destinations_in AS MATERIALIZED (
    SELECT d.item, d.id, d.type, d.value, d.label,
           row_number() OVER (PARTITION BY d.item ORDER BY d.ord) AS position
      FROM unnest($6::int[], $7::uuid[], $8::text[], $9::text[], $10::text[])
             WITH ORDINALITY AS d(item, id, type, value, label, ord)
  ), links AS (
    -- Each task's attachments as its row keeps them (migration 0019), written with the task so
    -- that the link tables' triggers find its copy already right.
    SELECT i.ord,
           coalesce(sk.ids, '[]'::jsonb) AS skill_ids,
           coalesce(so.ids, '[]'::jsonb) AS source_ids,
           coalesce(de.list, '[]'::jsonb) AS destinations
      FROM input i
      LEFT JOIN (SELECT item, jsonb_agg(id ORDER BY position) AS ids FROM skills_in GROUP BY item) sk
        ON sk.item = i.ord
      LEFT JOIN (SELECT item, jsonb_agg(id ORDER BY position) AS ids FROM sources_in GROUP BY item) so
        ON so.item = i.ord
      LEFT JOIN (SELECT item, jsonb_agg(jsonb_build_object('id', id, 'type', type, 'value', value,
                                                           'label', label) ORDER BY position) AS list
                   FROM destinations_in GROUP BY item) de
        ON de.item = i.ord
  ), foreign_ids AS MATERIALIZED (
    SELECT s.item, 'skillIds' AS field, s.position - 1 AS index
      FROM skills_in s JOIN input i ON i.ord = s.item
     WHERE ${notOwned('skills', 's.id', 'i.organization_id')}
    UNION ALL
    SELECT s.item, 'sourceIds', s.position - 1
      FROM sources_in s JOIN input i ON i.ord = s.item
     WHERE ${notOwned('sources', 's.id', 'i.organization_id')}
  ), destination_counts AS (
    SELECT d.item, count(*) AS n FROM unnest($6::int[]) AS d(item) GROUP BY d.item`;
  const linkWrites = `
  ), skills AS (
    INSERT INTO task_skills (task_id, skill_id, position)
    SELECT t.id, s.id, s.position FROM skills_in s JOIN input i ON i.ord = s.item JOIN task t ON t.id = i.id
  ), sources AS (
    INSERT INTO task_sources (task_id, source_id, position)
    SELECT t.id, s.id, s.position FROM sources_in s JOIN input i ON i.ord = s.item JOIN task t ON t.id = i.id
  ), destinations AS (
    INSERT INTO task_destinations (id, task_id, type, value, label, position, created_at)
    SELECT d.id, t.id, d.type, d.value, d.label, d.position, t.created_at
      FROM destinations_in d JOIN input i ON i.ord = d.item JOIN task t ON t.id = i.id`;
  return `
  WITH input AS MATERIALIZED (
    SELECT * FROM ROWS FROM (json_to_recordset($1::json) AS (
             id uuid, organization_id uuid, created_at timestamptz, name text, prompt text, model text,
             schedule text, status text, cron_expression text, schedule_time text, schedule_days text,
             timezone text, delivery_email boolean, delivery_email_address text, delivery_sms boolean,
             delivery_phone_number text, user_id text, next_run_at timestamptz, updated_at timestamptz,
             wake boolean, monthly_cost_limit_cents numeric, max_cost_cents_per_run numeric,
             output_schema json, required_tools jsonb, auto_pause_after_failures int, deliver_on text))
      WITH ORDINALITY AS i(id, organization_id, created_at, name, prompt, model, schedule, status,
                           cron_expression, schedule_time, schedule_days, timezone, delivery_email,
                           delivery_email_address, delivery_sms, delivery_phone_number, user_id,
                           next_run_at, updated_at, wake, monthly_cost_limit_cents, max_cost_cents_per_run,
                           output_schema, required_tools, auto_pause_after_failures, deliver_on, ord)${withLinks ? linkInputs : ''}
  ), orgs AS (
    -- In id order, so that statements locking several organizations cannot deadlock.
    -- NO KEY UPDATE: creates queue here, but inserts referencing the organization do not.
    SELECT o.id, o.plan, o.limit_overrides, o.active_tasks, o.total_tasks, o.task_prompt_bytes,
           o.total_destinations, ${tasksLimitOf('o', limits)} AS tasks_limit
      FROM organizations o WHERE o.id IN (SELECT organization_id FROM input)
     ORDER BY o.id
       FOR NO KEY UPDATE
  ), ranked AS (
    -- Running totals per organization, in input order: each candidate with those before it.
    SELECT r.ord,
           CASE WHEN ${overTasksLimit('o', 'r.rank', limits)} THEN 'tasks_limit'
                WHEN o.total_tasks + r.rank > (${caps}::jsonb->>'tasks')::int THEN 'tasks'
                WHEN o.task_prompt_bytes + r.prompt_bytes > (${caps}::jsonb->>'taskPromptBytes')::bigint
                  THEN 'taskPromptBytes'
                WHEN o.total_destinations + r.destinations > (${caps}::jsonb->>'destinations')::int
                  THEN 'destinations'
           END AS refusal
      FROM (
        SELECT i.ord, i.organization_id,
               row_number() OVER w AS rank,
               sum(octet_length(i.prompt)) OVER w AS prompt_bytes,
               ${withLinks ? 'sum(coalesce(c.n, 0)) OVER w' : '0'} AS destinations
          FROM input i${
            withLinks
              ? `
          LEFT JOIN destination_counts c ON c.item = i.ord
         WHERE NOT EXISTS (SELECT 1 FROM foreign_ids f WHERE f.item = i.ord)`
              : ''
          }
        WINDOW w AS (PARTITION BY i.organization_id ORDER BY i.ord)
      ) r JOIN orgs o ON o.id = r.organization_id
  ), accepted AS (
    SELECT i.* FROM input i JOIN ranked r ON r.ord = i.ord WHERE r.refusal IS NULL
  ), task AS (
    INSERT INTO tasks (id, organization_id, created_at, name, prompt, model, schedule, status,
                       cron_expression, schedule_time, schedule_days, timezone, delivery_email,
                       delivery_email_address, delivery_sms, delivery_phone_number, user_id,
                       next_run_at, updated_at, max_cost_cents_per_run, output_schema, required_tools,
                       auto_pause_after_failures, deliver_on, monthly_cost_limit_cents${
                         withLinks ? ', skill_ids, source_ids, destinations' : ''
                       })
    SELECT a.id, a.organization_id, a.created_at, a.name, a.prompt, a.model, a.schedule, a.status,
           a.cron_expression, a.schedule_time, string_to_array(a.schedule_days, ','), a.timezone,
           a.delivery_email, a.delivery_email_address, a.delivery_sms, a.delivery_phone_number,
           a.user_id, a.next_run_at, a.updated_at, a.max_cost_cents_per_run, a.output_schema,
           a.required_tools, a.auto_pause_after_failures, a.deliver_on, a.monthly_cost_limit_cents${
             withLinks
               ? `,
           l.skill_ids, l.source_ids, l.destinations
      FROM accepted a
      JOIN links l ON l.ord = a.ord`
               : `
      FROM accepted a`
           }
     ORDER BY a.ord
    RETURNING *${withLinks ? linkWrites : ''}
  )
  SELECT t.*, o.plan, o.tasks_limit, r.refusal,
         ${
           withLinks
             ? `(SELECT json_agg(json_build_object('field', f.field, 'index', f.index) ORDER BY f.field, f.index)
            FROM foreign_ids f WHERE f.item = i.ord)`
             : 'NULL::json'
         } AS foreign_ids,
         -- Identical notifications of one transaction are delivered once.
         CASE WHEN t.id IS NOT NULL AND i.wake THEN pg_notify('svc_tasks', '') END AS woke
    FROM input i LEFT JOIN orgs o ON o.id = i.organization_id LEFT JOIN task t ON t.id = i.id
         LEFT JOIN ranked r ON r.ord = i.ord
   ORDER BY i.ord`;
}

const CREATE_TASKS = createTasksStatement(true);
const CREATE_TASKS_WITHOUT_LINKS = createTasksStatement(false);
