import type { Queryable } from '../db.ts';
import type { AttemptRow, DeliveryStatus } from './deliveries.ts';
import { deliveryTargets } from './delivery-targets.ts';

/**
 * Task notices: messages about a task rather than about one of its runs (it paused itself, it
 * reached its monthly cost limit). A notice is queued as one delivery job per destination of
 * the task, with run_id null, its kind and its payload, and then goes through the same
 * dispatcher, retries and attempt log as a run's delivery.
 */
export const NOTICE_KINDS = ['task.paused', 'task.cost_limit_reached', 'source.disconnected'] as const;
export type NoticeKind = (typeof NOTICE_KINDS)[number];

/** task.paused: the task paused itself after `consecutiveFailures` failed runs in a row. */
export interface TaskPausedPayload {
  /** The task's pausedReason. */
  reason: string;
  consecutiveFailures: number;
  /** The run whose failure paused the task, and its error. */
  lastRunId: string;
  lastError: string;
}

/** task.cost_limit_reached: the task's runs this month cost its monthly limit or more. */
export interface CostLimitReachedPayload {
  /** The task's monthly cost limit and what its runs cost this month, in cents. */
  limitCents: number;
  costCents: number;
  /** The month the limit applies to (ISO 8601 instants). */
  periodStart: string;
  periodEnd: string;
}

/** source.disconnected: a source of the task lost its OAuth sign-in (the refresh failed); it needs reconnecting. */
export interface SourceDisconnectedPayload {
  sourceId: string;
  sourceName: string;
  /** Why, with what to do (no secret). */
  reason: string;
}

export interface NoticePayloads {
  'task.paused': TaskPausedPayload;
  'task.cost_limit_reached': CostLimitReachedPayload;
  'source.disconnected': SourceDisconnectedPayload;
}

/** A notice of one kind with the payload of that kind. */
export type TaskNotice = { [K in NoticeKind]: { kind: K; payload: NoticePayloads[K] } }[NoticeKind];

/**
 * Notice jobs kept per task once finished (delivered or failed): queueing a notice deletes the
 * task's older finished ones beyond this, so a task's notices stay bounded however long it lives.
 */
export const MAX_KEPT_NOTICE_JOBS = 100;

/**
 * The SQL that queues a notice to every target of a task. `task` is an SQL expression for the
 * task id, `kind` and `payload` SQL expressions (text, jsonb), `at` the time; `from` the
 * relation the values come from (one row per notice), and `targets` a relation of the task's
 * targets (a CTE of deliveryTargets). Shared by queueTaskNotice and the statement that records
 * a run's end (a pause is decided and told in one statement).
 */
export const insertNoticeJobs = (o: {
  task: string;
  kind: string;
  payload: string;
  at: string;
  from: string;
  targets: string;
}) => `
  INSERT INTO deliveries (id, organization_id, run_id, task_id, kind, payload, destination_id, channel, target,
                          label, position, status, next_attempt_at, created_at, updated_at)
  SELECT gen_random_uuid(), nt.organization_id, NULL, nt.id, ${o.kind}, ${o.payload}, tg.destination_id,
         tg.channel, tg.target, tg.label, tg.position, 'pending', ${o.at}, ${o.at}, ${o.at}
    FROM ${o.from}
    JOIN tasks nt ON nt.id = ${o.task}
   CROSS JOIN ${o.targets} tg`;

/**
 * Deletes the finished notice jobs of the tasks `tasks` (an SQL expression for an array of
 * task ids) beyond each task's newest MAX_KEPT_NOTICE_JOBS.
 */
export const pruneNoticeJobs = (tasks: string) => `
  DELETE FROM deliveries d
   USING (SELECT k.id, k.status, row_number() OVER (PARTITION BY k.task_id ORDER BY k.created_at DESC, k.id DESC) AS n
            FROM deliveries k WHERE k.task_id = ANY(${tasks})) k
   WHERE d.id = k.id AND k.n > ${MAX_KEPT_NOTICE_JOBS} AND k.status IN ('delivered', 'failed')`;

const QUEUE_TASK_NOTICE = `WITH input AS (SELECT $1::uuid AS task_id), targets AS (${deliveryTargets('$1::uuid')}),
  pruned AS (${pruneNoticeJobs('ARRAY[$1::uuid]')}),
  queued AS (${insertNoticeJobs({ task: 'input.task_id', kind: '$2::text', payload: '$3::jsonb', at: '$4::timestamptz', from: 'input', targets: 'targets' })}
  RETURNING id)
  SELECT count(*)::int AS jobs, CASE WHEN count(*) > 0 THEN pg_notify('svc_deliveries', '') END AS woke FROM queued`;

/**
 * Queues a notice of `kind` to every destination of the task (one delivery job each), due at
 * `now`, and wakes the dispatchers when the transaction commits. Returns how many jobs were
 * queued: 0 when the task has no destination (or does not exist). The caller decides that the
 * notice is due, and that it is told once (in the transaction that records why).
 */
export async function queueTaskNotice(
  db: Queryable,
  taskId: string,
  notice: TaskNotice,
  now: Date,
): Promise<number> {
  const [row] = await db.query<{ jobs: number }>(QUEUE_TASK_NOTICE, [
    taskId,
    notice.kind,
    JSON.stringify(notice.payload),
    now,
  ]);
  return row?.jobs ?? 0;
}

/** One notice job as the task page shows it. */
export interface NoticeJobRow {
  id: string;
  kind: NoticeKind;
  payload: Record<string, unknown>;
  channel: 'email' | 'sms' | 'webhook';
  target: string;
  label: string | null;
  status: DeliveryStatus;
  last_error: string | null;
  delivered_at: Date | null;
  created_at: Date;
  attempt_log: AttemptRow[];
}

/** The task's newest notice jobs (the task must be the organization's), each with its attempts. */
export function listTaskNoticeJobs(
  db: Queryable,
  organizationId: string,
  taskId: string,
  limit: number,
): Promise<NoticeJobRow[]> {
  return db.query<NoticeJobRow>(
    `SELECT d.id, d.kind, d.payload, d.channel, d.target, d.label, d.status, d.last_error, d.delivered_at,
            d.created_at,
            coalesce((SELECT json_agg(json_build_object(
               'attempt', a.attempt, 'started_at', a.started_at, 'duration_ms', a.duration_ms,
               'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error, 'response', a.response)
               ORDER BY a.attempt)
             FROM delivery_attempts a WHERE a.delivery_id = d.id), '[]'::json) AS attempt_log
       FROM deliveries d
      WHERE d.task_id = $2 AND d.organization_id = $1
      ORDER BY d.created_at DESC, d.position, d.id
      LIMIT $3`,
    [organizationId, taskId, limit],
  );
}
