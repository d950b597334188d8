import { type Db, PLAN_EACH_TIME, type Queryable, type Statement } from '../db.ts';
import { deliveryTargets } from './delivery-targets.ts';
import { type LeasedTable, releaseLeased, renewLeased } from './leased-jobs.ts';
import type { RunRow } from './runs.ts';
import { insertNoticeJobs, pruneNoticeJobs } from './task-notices.ts';
import { isoTime } from './time.ts';

/**
 * The run queue lives in the runs table: `pending` runs wait; a worker claims one by setting it
 * `running` with a lease (lease_owner, lease_expires_at) that it renews by heartbeat. Every write
 * by a worker is conditioned on still holding the lease, so a worker that lost its lease (it was
 * presumed dead and the run given to another) can never overwrite the new holder's result.
 * The claim, fair across organizations and exact about their limit, is run-claim.ts.
 */

export interface ExpiredLease {
  id: string;
  organization_id: string;
  attempts: number;
}

/**
 * Running runs whose lease has expired (their worker stopped heartbeating), locked for recovery.
 * `alive` are the asking worker's own runs still in its hands: it knows they are alive (a lease
 * it could not renew during a database outage is renewed when the database is back).
 */
export function lockExpiredLeases(
  tx: Queryable,
  now: Date,
  alive: readonly string[],
): Promise<ExpiredLease[]> {
  return tx.query<ExpiredLease>(
    `${PLAN_EACH_TIME} SELECT id, organization_id, attempts FROM runs
      WHERE status = 'running' AND lease_expires_at < $1 AND NOT (id = ANY($2::uuid[]))
      ORDER BY lease_expires_at
      LIMIT 1000
      FOR UPDATE SKIP LOCKED`,
    [now, alive],
  );
}

/** What a run returned to the queue looks like: pending, no lease, not started. */
const BACK_TO_PENDING = `status = 'pending', lease_owner = NULL, lease_expires_at = NULL, started_at = NULL`;

/**
 * The runs table under the leased-job contract (leased-jobs.ts) for renewing and releasing.
 * Claims are claimRuns (run-claim.ts: the per-organization fair claim), recovery is lockExpiredLeases with
 * requeueRuns (a run may also be failed for good), and a run is settled by
 * recordRunEndAndQueueDeliveries, conditioned on the lease like any settle.
 */
const RUNS: LeasedTable = {
  table: 'runs',
  held: `status = 'running'`,
  onReturn: `status = 'pending', started_at = NULL`,
  // Released untried (shutdown): the attempt does not count.
  onRelease: 'attempts = greatest(attempts - 1, 0)',
};

/** Puts runs whose worker died back in the queue for another worker (the attempt still counts). */
export async function requeueRuns(tx: Queryable, ids: string[]): Promise<void> {
  if (!ids.length) return;
  await tx.query(`UPDATE runs SET ${BACK_TO_PENDING} WHERE id = ANY($1::uuid[]) AND status = 'running'`, [
    ids,
  ]);
}

/** Renews the leases this worker holds; returns the ids it still holds (a missing one was lost). */
export function renewLeases(
  db: Queryable,
  workerId: string,
  ids: string[],
  now: Date,
  leaseMs: number,
): Promise<Set<string>> {
  return renewLeased(db, RUNS, { owner: workerId, ids, now, leaseMs });
}

/**
 * Wakes the workers of every process when the organization has pending runs and a free place
 * under `orgLimit`: sent after a run of it has left `running` and that change has committed, so
 * a worker that looked while the place was still taken looks again. The notification is sent
 * at this statement's commit, after the change it announces; only then can a claim see it.
 */
export async function notifyIfClaimable(
  db: Queryable,
  organizationId: string,
  orgLimit: number,
): Promise<void> {
  await db.query(
    `SELECT pg_notify('svc_runs', '')
      WHERE EXISTS (SELECT 1 FROM runs WHERE organization_id = $1 AND status = 'pending')
        AND (SELECT count(*) FROM runs WHERE organization_id = $1 AND status = 'running') < $2`,
    [organizationId, orgLimit],
  );
}

/** Gives a run back unfinished (shutdown): pending again, the attempt not counted. */
export function releaseRun(db: Queryable, runId: string, workerId: string): Promise<boolean> {
  return releaseLeased(db, RUNS, { id: runId, owner: workerId });
}

export interface RunResultRow {
  status: 'completed' | 'failed';
  output: string | null;
  error: string | null;
  /** Null: the database's clock (see completionTime in time.ts). */
  completedAt: Date | null;
  /**
   * How long the run waited in its worker between its claim and its execution (claimed ahead,
   * worker/claim-ahead.ts): its start is moved that much later, so that its duration is its
   * execution's. Absent: 0.
   */
  heldMs?: number;
}

/** When the run ended (i: the run's input row): the worker's manual clock in tests, else the database's clock. */
const COMPLETED_AT = 'coalesce(i.completed_at, statement_timestamp())';
/** When its execution began (r: the run before the update): its claim, moved by the time it was held. */
const STARTED_AT = "(r.started_at + i.held_ms * interval '1 millisecond')";

/**
 * Whether a run that ended counts towards its task's autoPauseAfterFailures: a run a person
 * canceled does not (a cancel ends its run in its own statement, run-cancel.ts, and leaves the
 * count as it was; the condition keeps it so should a canceled run ever pass through here).
 */
const COUNTS_AS_FAILURE = `run.status = 'failed' AND run.canceled_at IS NULL`;

/** An output compared by deliverOn `change`: runs of whitespace as one space, trimmed. */
const normalised = (text: string) => `btrim(regexp_replace(${text}, '\\s+', ' ', 'g'))`;

/** In the task's UPDATE (t: the task before it, e: the ended run): a scheduled `once` task is done. */
const ONCE_DONE = `(e.run_trigger = 'schedule' AND t.status = 'active' AND t.schedule = 'once' AND t.cron_expression IS NULL)`;
/** In the task's UPDATE: the run's failure takes the task to its autoPauseAfterFailures. */
const PAUSES = `(t.status = 'active' AND t.auto_pause_after_failures > 0 AND e.failures >= t.auto_pause_after_failures)`;
/**
 * In the task's UPDATE: a completed run of a deliverOn `change` task is sent, so it becomes the
 * output the task's next runs are compared with.
 */
const SENT_FOR_CHANGE = `(e.run_status = 'completed' AND t.deliver_on = 'change' AND e.deliver
  AND EXISTS (SELECT 1 FROM targets g WHERE g.run_id = e.run_id))`;
/** The pausedReason, at most 500 characters (the error is cut, not the count). */
const PAUSED_REASON = `left(format('Paused after %s consecutive failed runs; the last failed with: %s',
  e.failures, coalesce(nullif(btrim(e.run_error), ''), 'no reason was given')), 500)`;

// Built once (statements are named by their text; see FIND_TASK in tasks.ts).
const LOCK_RUN_AND_TASK = `WITH r AS MATERIALIZED (SELECT task_id FROM runs WHERE id = $1 FOR NO KEY UPDATE)
  SELECT t.id FROM tasks t JOIN r ON t.id = r.task_id FOR NO KEY UPDATE OF t`;

/**
 * The ends of several runs of distinct tasks in one statement: one executor start, one plan
 * check and one set of index openings for all of them, where a statement per run paid those per
 * run (most of a run's end cost in the database). Every CTE carries the run's id (run_id) and
 * each big table is reached through the = ANY of the runs' ids, so that the forced generic plan
 * (Db.batch) probes their indexes whatever the number of runs. Two runs of one task must not
 * be in one statement: each must see what the other's end did to the task (recordLockedRunEndsStatement).
 */
const RECORD_RUN_ENDS = `WITH input AS (
       SELECT i.*, r.task_id
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::int[])
           AS i(run_id, worker_id, status, output, error, completed_at, held_ms)
         JOIN runs r ON r.id = i.run_id
        WHERE r.id = ANY($1::uuid[])
     ), task AS (
       -- Read after the tasks' locks were taken (lockRunsAndTasksStatement): another run of the
       -- task that ended first is seen with its output, count and last delivered run.
       SELECT i.run_id, k.id, k.status, k.deliver_on, k.consecutive_failures, k.last_delivered_run_id,
              k.schedule, k.cron_expression, k.auto_pause_after_failures,
              (k.destinations <> '[]'::jsonb OR k.delivery_email OR k.delivery_sms) AS has_targets,
              CASE WHEN i.status = 'failed' THEN true
                   WHEN k.deliver_on = 'failure' THEN false
                   WHEN k.deliver_on = 'change' THEN
                     (SELECT ${normalised("coalesce(p.output, '')")} FROM runs p WHERE p.id = k.last_delivered_run_id)
                       IS DISTINCT FROM ${normalised("coalesce(i.output, '')")}
                   ELSE true END AS deliver
         FROM input i JOIN tasks k ON k.id = i.task_id
        WHERE k.id = ANY(ARRAY(SELECT task_id FROM input))
     ), targets AS (
       -- Looked up only for a task that names any (most have none): its destinations are a
       -- copy of task_destinations in every snapshot (migration 0019), the legacy flags its own.
       SELECT k.run_id, g.* FROM task k CROSS JOIN LATERAL (${deliveryTargets('k.id')}) g
        WHERE k.has_targets
     ), run AS (
       UPDATE runs r SET status = i.status, output = i.output, error = i.error,
              -- Tokens and cost were added to the ledger call by call (recordModelCallsStatement, usage.ts).
              cost_cents = greatest(r.cost_cents, coalesce((SELECT u.cost_cents FROM usage_ledger u WHERE u.run_id = r.id), 0)),
              tokens_used = greatest(r.tokens_used, coalesce((SELECT u.tokens_used FROM usage_ledger u WHERE u.run_id = r.id), 0)),
              completed_at = ${COMPLETED_AT},
              started_at = ${STARTED_AT},
              duration_ms = CASE WHEN r.started_at IS NULL THEN NULL
                                 ELSE greatest(0, round(extract(epoch FROM (${COMPLETED_AT} - ${STARTED_AT})) * 1000))::int END,
              lease_owner = NULL, lease_expires_at = NULL,
              -- Suppressed deliveries (deliverOn) leave it absent, as when there is no destination.
              delivery_status = CASE WHEN EXISTS (SELECT 1 FROM targets g WHERE g.run_id = r.id)
                                      AND (SELECT k.deliver FROM task k WHERE k.run_id = r.id) THEN 'pending' END
         FROM input i
        WHERE r.id = ANY($1::uuid[]) AND r.id = i.run_id
          AND r.status = 'running' AND (i.worker_id IS NULL OR r.lease_owner = i.worker_id)
       RETURNING r.*
     ), ledger AS (
       UPDATE usage_ledger u SET status = run.status
         FROM run WHERE u.run_id = ANY($1::uuid[]) AND u.run_id = run.id
     ), ended AS (
       SELECT run.id AS run_id, run.task_id, run.organization_id, run.status AS run_status, run.error AS run_error,
              run.trigger AS run_trigger, run.completed_at, task.status AS task_status, task.deliver,
              CASE WHEN run.status = 'completed' THEN 0
                   WHEN ${COUNTS_AS_FAILURE} THEN task.consecutive_failures + 1
                   ELSE task.consecutive_failures END AS failures
         FROM run JOIN task ON task.run_id = run.id
     ), changing AS (
       -- What each end does to its task, decided on the task as \`task\` read it (after its lock,
       -- in this statement's snapshot: what the UPDATE below sees), so that the tasks' rows are
       -- read again only for the ends that change them: most runs of most tasks change nothing.
       SELECT e.task_id, e.organization_id, (${ONCE_DONE} OR ${PAUSES}) AS leaves_active,
              (${ONCE_DONE} OR ${PAUSES} OR e.failures <> t.consecutive_failures OR ${SENT_FOR_CHANGE}) AS changes
         FROM ended e JOIN task t ON t.run_id = e.run_id
     ), status_organizations AS (
       -- A task leaving 'active' updates its organization's row (its active-task count, by a
       -- trigger); those rows are taken here in id order, as schedulers take them, before the
       -- tasks' UPDATE would take them in whatever order it meets its rows.
       SELECT o.id FROM organizations o
        WHERE o.id IN (SELECT c.organization_id FROM changing c WHERE c.leaves_active)
        ORDER BY o.id FOR NO KEY UPDATE
     ), task_end AS (
       -- One UPDATE of each task (two in one statement would not both apply): a once task's
       -- completion, the failure count, an automatic pause, the last delivered output.
       UPDATE tasks t SET
              status = CASE WHEN ${ONCE_DONE} THEN 'completed' WHEN ${PAUSES} THEN 'paused' ELSE t.status END,
              next_run_at = CASE WHEN ${ONCE_DONE} OR ${PAUSES} THEN NULL ELSE t.next_run_at END,
              updated_at = CASE WHEN ${ONCE_DONE} OR ${PAUSES} THEN e.completed_at ELSE t.updated_at END,
              paused_reason = CASE WHEN NOT ${ONCE_DONE} AND ${PAUSES} THEN ${PAUSED_REASON} ELSE t.paused_reason END,
              consecutive_failures = e.failures,
              last_delivered_run_id = CASE WHEN ${SENT_FOR_CHANGE} THEN e.run_id ELSE t.last_delivered_run_id END
         FROM ended e
        -- Only when something changes: most runs of most tasks leave the task's row as it was.
        WHERE t.id = ANY(ARRAY(SELECT task_id FROM changing WHERE changes)) AND t.id = e.task_id
          AND (${ONCE_DONE} OR ${PAUSES} OR e.failures <> t.consecutive_failures OR ${SENT_FOR_CHANGE})
          -- Evaluated once, before the first task's row is updated.
          AND (SELECT count(*) FROM status_organizations) >= 0
       RETURNING t.id, t.paused_reason, t.consecutive_failures, e.run_id, e.run_error, e.completed_at,
                 (t.status = 'paused' AND e.task_status = 'active') AS paused
     ), pruned AS (
       ${pruneNoticeJobs('ARRAY(SELECT id FROM task_end WHERE paused)')}
     ), notice AS (
       ${insertNoticeJobs({
         task: 'p.id',
         kind: `'task.paused'`,
         payload: `jsonb_build_object('reason', p.paused_reason, 'consecutiveFailures', p.consecutive_failures,
                                      'lastRunId', p.run_id, 'lastError', coalesce(p.run_error, ''))`,
         at: 'p.completed_at',
         from: 'task_end p',
         targets: 'LATERAL (SELECT * FROM targets g WHERE g.run_id = p.run_id)',
       })}
        WHERE p.paused
     ), queued AS (
       INSERT INTO deliveries (id, organization_id, run_id, destination_id, channel, target, label, position,
                               status, next_attempt_at, previous_run_id, created_at, updated_at)
       SELECT gen_random_uuid(), run.organization_id, run.id, targets.destination_id, targets.channel,
              targets.target, targets.label, targets.position,
              CASE WHEN task.deliver THEN 'pending' ELSE 'suppressed' END,
              CASE WHEN task.deliver THEN run.completed_at END,
              CASE WHEN task.deliver AND run.status = 'completed' AND task.deliver_on = 'change'
                   THEN task.last_delivered_run_id END,
              run.completed_at, run.completed_at
         FROM run JOIN targets ON targets.run_id = run.id JOIN task ON task.run_id = run.id
     )
     -- One row (a batch returns each statement's first row): the ended runs, what their
     -- writers read of them (EndedRun); not the output they sent.
     SELECT json_agg(json_build_object('id', run.id, 'organization_id', run.organization_id,
              'status', run.status, 'cost_cents', run.cost_cents, 'tokens_used', run.tokens_used,
              'duration_ms', run.duration_ms, 'delivery_status', run.delivery_status)) AS runs
       FROM run`;

/**
 * Records a run's end; the caller holds a transaction. First the run's row and then its task's
 * are locked, so that two runs of one task ending at once are decided one after the other (the
 * second sees the first's output, failure count and pause). Then one statement records: the
 * run (only while `workerId` holds it; pass null for a run failed by lease recovery) with the
 * tokens and cost its ledger row has gathered, the ledger row's status, the task's side (a
 * `once` task's completion, its consecutive failures and an automatic pause with its one
 * `task.paused` notice, the last delivered output), and one delivery job per destination:
 * `pending` (deliveryStatus `pending`) or, when deliverOn holds the run back, `suppressed`
 * (deliveryStatus absent). Returns the finished run, or undefined when the lease was no longer
 * this worker's.
 */
export async function recordRunEndAndQueueDeliveries(
  tx: Queryable,
  runId: string,
  workerId: string | null,
  r: RunResultRow,
): Promise<EndedRun | undefined> {
  await tx.query(LOCK_RUN_AND_TASK, [runId]);
  return recordLockedRunEnd(tx, runId, workerId, r);
}

// The tasks' subquery refers to the runs' count, so it is evaluated after every run is locked;
// ORDER BY under FOR NO KEY UPDATE locks the rows in that order.
const LOCK_RUNS_AND_TASKS = `SELECT t.id FROM (
       SELECT count(*) AS n FROM (SELECT id FROM runs WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE) r
     ) a
     CROSS JOIN LATERAL (
       SELECT k.id FROM tasks k WHERE k.id = ANY($2::uuid[]) AND a.n >= 0 ORDER BY k.id FOR NO KEY UPDATE
     ) t`;

/**
 * Locks the rows of several runs, then the rows of the tasks of those of them that are ending
 * (their ids given by the caller: a run's task never changes), each set in id order, in one
 * statement (sent in a batch, Db.batch). Every transaction that finishes runs takes its runs before their tasks, and a
 * batch takes each set in one fixed order, so two batches ending runs of the same tasks wait
 * for each other instead of deadlocking. A run that no longer exists (deleted with its task) is
 * simply not locked.
 */
export function lockRunsAndTasksStatement(runIds: readonly string[], taskIds: readonly string[]): Statement {
  return { sql: LOCK_RUNS_AND_TASKS, params: [runIds, taskIds] };
}

/** What a run's end returns of the run it ended. */
export type EndedRun = Pick<
  RunRow,
  'id' | 'organization_id' | 'status' | 'cost_cents' | 'tokens_used' | 'duration_ms' | 'delivery_status'
>;

/** A run's end as recordLockedRunEndsStatement takes it. */
export interface RunEnd {
  runId: string;
  /** The worker that must still hold the run; null for a run failed by lease recovery. */
  workerId: string | null;
  result: RunResultRow;
}

/**
 * The statement of recordRunEndAndQueueDeliveries alone, for a caller that has locked the run
 * and its task (lockRunsAndTasksStatement) in its transaction.
 */
export async function recordLockedRunEnd(
  tx: Queryable,
  runId: string,
  workerId: string | null,
  r: RunResultRow,
): Promise<EndedRun | undefined> {
  const { sql, params } = recordLockedRunEndsStatement([{ runId, workerId, result: r }]);
  const [row] = await tx.query<Record<string, unknown>>(sql, params);
  return endedRuns(row)[0];
}

/**
 * The ends of `ends` in one statement (RECORD_RUN_ENDS), for a batch (Db.batch) whose
 * caller has locked their runs and tasks (lockRunsAndTasksStatement). The runs' tasks must be
 * distinct: two ends of one task go in two statements, one after the other, so that the second
 * sees the first's effect on the task. Its row is read by endedRuns.
 */
export function recordLockedRunEndsStatement(ends: readonly RunEnd[]): Statement {
  return {
    sql: RECORD_RUN_ENDS,
    params: [
      ends.map((e) => e.runId),
      ends.map((e) => e.workerId),
      ends.map((e) => e.result.status),
      ends.map((e) => e.result.output),
      ends.map((e) => e.result.error),
      ends.map((e) => isoTime(e.result.completedAt)),
      ends.map((e) => Math.max(0, Math.round(e.result.heldMs ?? 0))),
    ],
  };
}

/**
 * The runs a statement of recordLockedRunEndsStatement ended (those still held by their worker),
 * from its row; a run whose lease was lost, or that was deleted, is not among them.
 */
export function endedRuns(row: Record<string, unknown> | undefined): EndedRun[] {
  const runs = typeof row?.runs === 'string' ? JSON.parse(row.runs) : row?.runs;
  return Array.isArray(runs) ? (runs as EndedRun[]) : [];
}

/**
 * The notifications of runs' ends, sent once the ends have committed (a statement of its own:
 * see RunWriteBatcher): `svc_deliveries` when `deliveries` (delivery jobs were queued), and
 * `svc_runs` when one of `organizationIds` has pending runs and a free place under `orgLimit`
 * (notifyIfClaimable for several organizations).
 */
export async function notifyRunEnds(
  db: Db,
  deliveries: boolean,
  organizationIds: readonly string[],
  orgLimit: number,
): Promise<void> {
  // A batch of one, so that it is planned once (its plan does not depend on the values).
  await db.batch([{ sql: NOTIFY_RUN_ENDS, params: [deliveries, organizationIds, orgLimit] }]);
}

const NOTIFY_RUN_ENDS = `SELECT CASE WHEN $1::boolean THEN pg_notify('svc_deliveries', '') END AS deliveries,
        (SELECT pg_notify('svc_runs', '') WHERE EXISTS (
           SELECT 1 FROM unnest($2::uuid[]) AS o(id)
            -- One probe of runs_pending_org_idx per organization (ORDER BY its key, LIMIT 1):
            -- an EXISTS here is planned as a join over every pending run, and a bare LIMIT
            -- as a scan of the table.
            WHERE (SELECT 1 FROM runs WHERE organization_id = o.id AND status = 'pending'
                    ORDER BY organization_id, created_at, id LIMIT 1) IS NOT NULL
              AND (SELECT count(*) FROM runs WHERE organization_id = o.id AND status = 'running') < $3
        )) AS runs`;
