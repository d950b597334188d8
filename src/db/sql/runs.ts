import type { Queryable } from '../db.ts';

export type RunStatus = 'pending' | 'running' | 'completed' | 'failed';
export type DeliveryStatus = 'pending' | 'delivered' | 'failed';
export type RunTrigger = 'schedule' | 'manual' | 'replay';

/** A row of the runs table. */
export interface RunRow {
  id: string;
  organization_id: string;
  task_id: string;
  /** The schedule slot this run is for; null for on-demand runs. */
  slot_at: Date | null;
  trigger: RunTrigger;
  status: RunStatus;
  delivery_status: DeliveryStatus | null;
  output: string | null;
  error: string | null;
  cost_cents: number;
  tokens_used: number;
  duration_ms: number | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  /** The worker holding the run while it is running (see run-queue.ts). */
  lease_owner: string | null;
  lease_expires_at: Date | null;
  /** Worker starts of this run, takeovers included. */
  attempts: number;
  /** When a cancel ended the run (it is then `failed`); null otherwise. */
  canceled_at: Date | null;
  /** The run a replay replays (migration 0013). */
  replay_of: string | null;
  /** A replay's time context: the instant it names as now, and the slot it names (if any). */
  replay_context_at: Date | null;
  replay_slot_at: Date | null;
  /** The model a replay runs with (the task's when it was created, unless another was asked); null: the task's. */
  model: string | null;
}

/** A run's timestamps, as row_to_json writes them, back to Dates. */
const RUN_TIMESTAMPS = [
  'slot_at',
  'created_at',
  'started_at',
  'completed_at',
  'lease_expires_at',
  'canceled_at',
  'replay_context_at',
  'replay_slot_at',
] as const;

export function runFromJson(run: RunRow): RunRow {
  const fields = run as unknown as Record<string, unknown>;
  for (const k of RUN_TIMESTAMPS) {
    if (typeof fields[k] === 'string') fields[k] = new Date(fields[k] as string);
  }
  return run;
}

/** What makes a run a replay (see replayRun in domain/run-control.ts). */
export interface ReplayFields {
  replayOf: string;
  contextAt: Date;
  slotAt: Date | null;
  model: string;
}

export interface NewRun {
  id: string;
  organizationId: string;
  taskId: string;
  slotAt: Date | null;
  trigger: RunTrigger;
  now: Date;
  replay?: ReplayFields;
}

/**
 * Inserting a run already claimed (run now, run-now.ts): `before`, CTEs that come first; the
 * run's `status` (an SQL expression: running when claimed, else pending); and the values of
 * lease_owner, lease_expires_at, attempts and started_at, which are the columns' defaults for a
 * pending run.
 */
export interface ClaimedInsert {
  before: string;
  status: string;
  lease: [owner: string, expiresAt: string, attempts: string, startedAt: string];
}

/**
 * One statement inserts the pending run and its usage-ledger row (pending too, whatever the run:
 * a run's end sets it), so no caller (in a transaction or not) can get one without the other.
 * The run is only inserted when the task exists in the organization. (Scheduled runs are
 * inserted a batch at a time by insertSlotRuns, scheduler.ts, the same way.)
 */
export const insertRunStatement = (from: string, filter = '', claimed?: ClaimedInsert) => `WITH ${
  claimed ? `${claimed.before}, ` : ''
}run AS (
       INSERT INTO runs (id, organization_id, task_id, slot_at, trigger, status, created_at,
                         replay_of, replay_context_at, replay_slot_at, model${
                           claimed ? ', lease_owner, lease_expires_at, attempts, started_at' : ''
                         })
       SELECT $1, t.organization_id, t.id, $4, $5, ${claimed?.status ?? "'pending'"}, $6, $7, $8, $9, $10${
         claimed ? `, ${claimed.lease.join(', ')}` : ''
       }
         FROM ${from} WHERE t.id = $3 AND t.organization_id = $2${filter}
       RETURNING *
     ), ledger AS (
       INSERT INTO usage_ledger (run_id, organization_id, task_id, status, created_at)
       SELECT id, organization_id, task_id, 'pending', created_at FROM run
     )`;
const INSERT_RUN = insertRunStatement('tasks t');
const INSERT_RUN_SQL = `${INSERT_RUN} SELECT * FROM run`;
/**
 * The same, and NOTIFY svc_runs named by the run's id (sent at the commit) in the same
 * statement: one round trip fewer before the commit that the workers wait for.
 */
export const SELECT_RUN_NOTIFIED = `SELECT run.* FROM run
     CROSS JOIN LATERAL (SELECT pg_notify('svc_runs', run.id::text)) AS notified`;
const INSERT_RUN_NOTIFY_SQL = `${INSERT_RUN} ${SELECT_RUN_NOTIFIED}`;

export const insertParams = (row: NewRun) => [
  row.id,
  row.organizationId,
  row.taskId,
  row.slotAt,
  row.trigger,
  row.now,
  row.replay?.replayOf ?? null,
  row.replay?.contextAt ?? null,
  row.replay?.slotAt ?? null,
  row.replay?.model ?? null,
];

/**
 * Creates a pending run and its usage-ledger row in one statement (`notify`: with NOTIFY
 * svc_runs, payload the run's id). Throws when the task does not exist in the organization, or
 * (a unique violation) when the task's slot already has a run.
 */
export async function insertRun(db: Queryable, row: NewRun, o: { notify?: boolean } = {}): Promise<RunRow> {
  const [run] = await db.query<RunRow>(o.notify ? INSERT_RUN_NOTIFY_SQL : INSERT_RUN_SQL, insertParams(row));
  if (!run) throw new Error(`insertRun: task ${row.taskId} not found in organization ${row.organizationId}`);
  return run;
}

export async function findRun(
  db: Queryable,
  organizationId: string,
  runId: string,
): Promise<RunRow | undefined> {
  const [run] = await db.query<RunRow>('SELECT * FROM runs WHERE id = $1 AND organization_id = $2', [
    runId,
    organizationId,
  ]);
  return run;
}

/** The organization's runs across all tasks, newest first. */
export async function listRunsForOrganization(
  db: Queryable,
  organizationId: string,
  limit: number,
): Promise<RunRow[]> {
  return db.query<RunRow>(
    'SELECT * FROM runs WHERE organization_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2',
    [organizationId, limit],
  );
}

/** One task's runs, newest first (empty when the task is not the organization's). */
export async function listRunsForTask(
  db: Queryable,
  organizationId: string,
  taskId: string,
  limit: number,
): Promise<RunRow[]> {
  return db.query<RunRow>(
    `SELECT * FROM runs WHERE organization_id = $1 AND task_id = $2
     ORDER BY created_at DESC, id DESC LIMIT $3`,
    [organizationId, taskId, limit],
  );
}

/** Whether the task exists in the organization (the runs list of a task answers 404 otherwise). */
export async function taskExistsInOrganization(
  db: Queryable,
  organizationId: string,
  taskId: string,
): Promise<boolean> {
  const rows = await db.query('SELECT 1 FROM tasks WHERE id = $1 AND organization_id = $2', [
    taskId,
    organizationId,
  ]);
  return rows.length > 0;
}
