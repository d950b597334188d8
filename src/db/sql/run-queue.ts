import { PLAN_EACH_TIME, type Queryable } from '../db.ts';
import { deliveryTargets } from './delivery-targets.ts';
import { type LeasedTable, releaseLeased, renewLeased } from './leased-jobs.ts';
import type { RunRow } from './runs.ts';
import { runStatementBatch, type Statement } from './statement-batch.ts';
import { insertNoticeJobs, pruneNoticeJobs } from './task-notices.ts';

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
}

/** When the run ended: the worker's manual clock in tests, else the database's clock. */
const COMPLETED_AT = 'coalesce($6::timestamptz, statement_timestamp())';

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
const SENT_FOR_CHANGE = `(e.run_status = 'completed' AND t.deliver_on = 'change' AND e.deliver AND EXISTS (SELECT 1 FROM targets))`;
/** The pausedReason, at most 500 characters (the error is cut, not the count). */
const PAUSED_REASON = `left(format('Paused after %s consecutive failed runs; the last failed with: %s',
  e.failures, coalesce(nullif(btrim(e.run_error), ''), 'no reason was given')), 500)`;

// Built once (statements are named by their text; see FIND_TASK in tasks.ts).
const LOCK_RUN_AND_TASK = `WITH r AS MATERIALIZED (SELECT task_id FROM runs WHERE id = $1 FOR NO KEY UPDATE)
  SELECT t.id FROM tasks t JOIN r ON t.id = r.task_id FOR NO KEY UPDATE OF t`;

const RECORD_RUN_END = `WITH targets AS (
       ${deliveryTargets('(SELECT task_id FROM runs WHERE id = $1)')}
     ), task AS (
       -- Read after the task's lock was taken (LOCK_RUN_AND_TASK): another run of the task that
       -- ended first is seen with its output, count and last delivered run.
       SELECT k.id, k.status, k.deliver_on, k.consecutive_failures, k.last_delivered_run_id,
              CASE WHEN $3 = 'failed' THEN true
                   WHEN k.deliver_on = 'failure' THEN false
                   WHEN k.deliver_on = 'change' THEN
                     (SELECT ${normalised("coalesce(p.output, '')")} FROM runs p WHERE p.id = k.last_delivered_run_id)
                       IS DISTINCT FROM ${normalised("coalesce($4::text, '')")}
                   ELSE true END AS deliver
         FROM tasks k WHERE k.id = (SELECT task_id FROM runs WHERE id = $1)
     ), run AS (
       UPDATE runs SET status = $3, output = $4, error = $5,
              -- Tokens and cost were added to the ledger call by call (recordModelCallsStatement, usage.ts).
              cost_cents = greatest(cost_cents, coalesce((SELECT u.cost_cents FROM usage_ledger u WHERE u.run_id = $1), 0)),
              tokens_used = greatest(tokens_used, coalesce((SELECT u.tokens_used FROM usage_ledger u WHERE u.run_id = $1), 0)),
              completed_at = ${COMPLETED_AT},
              duration_ms = CASE WHEN started_at IS NULL THEN NULL
                                 ELSE greatest(0, round(extract(epoch FROM (${COMPLETED_AT} - started_at)) * 1000))::int END,
              lease_owner = NULL, lease_expires_at = NULL,
              -- Suppressed deliveries (deliverOn) leave it absent, as when there is no destination.
              delivery_status = CASE WHEN EXISTS (SELECT 1 FROM targets) AND (SELECT deliver FROM task) THEN 'pending' END
        WHERE id = $1 AND status = 'running' AND ($2::text IS NULL OR lease_owner = $2)
       RETURNING *
     ), ledger AS (
       UPDATE usage_ledger u SET status = run.status
         FROM run WHERE u.run_id = run.id
     ), ended AS (
       SELECT run.id AS run_id, run.task_id, run.status AS run_status, run.error AS run_error,
              run.trigger AS run_trigger, task.status AS task_status, task.deliver,
              CASE WHEN run.status = 'completed' THEN 0
                   WHEN ${COUNTS_AS_FAILURE} THEN task.consecutive_failures + 1
                   ELSE task.consecutive_failures END AS failures
         FROM run JOIN task ON task.id = run.task_id
     ), task_end AS (
       -- One UPDATE of the task (two in one statement would not both apply): a once task's
       -- completion, the failure count, an automatic pause, the last delivered output.
       UPDATE tasks t SET
              status = CASE WHEN ${ONCE_DONE} THEN 'completed' WHEN ${PAUSES} THEN 'paused' ELSE t.status END,
              next_run_at = CASE WHEN ${ONCE_DONE} OR ${PAUSES} THEN NULL ELSE t.next_run_at END,
              updated_at = CASE WHEN ${ONCE_DONE} OR ${PAUSES} THEN ${COMPLETED_AT} ELSE t.updated_at END,
              paused_reason = CASE WHEN NOT ${ONCE_DONE} AND ${PAUSES} THEN ${PAUSED_REASON} ELSE t.paused_reason END,
              consecutive_failures = e.failures,
              last_delivered_run_id = CASE WHEN ${SENT_FOR_CHANGE} THEN e.run_id ELSE t.last_delivered_run_id END
         FROM ended e
        -- Only when something changes: most runs of most tasks leave the task's row as it was.
        WHERE t.id = e.task_id
          AND (${ONCE_DONE} OR ${PAUSES} OR e.failures <> t.consecutive_failures OR ${SENT_FOR_CHANGE})
       RETURNING t.id, t.paused_reason, t.consecutive_failures, e.run_id, e.run_error,
                 (t.status = 'paused' AND e.task_status = 'active') AS paused
     ), pruned AS (
       ${pruneNoticeJobs('(SELECT id FROM task_end WHERE paused)')}
     ), notice AS (
       ${insertNoticeJobs({
         task: 'p.id',
         kind: `'task.paused'`,
         payload: `jsonb_build_object('reason', p.paused_reason, 'consecutiveFailures', p.consecutive_failures,
                                      'lastRunId', p.run_id, 'lastError', coalesce(p.run_error, ''))`,
         at: COMPLETED_AT,
         from: 'task_end p',
         targets: 'targets',
       })}
        WHERE p.paused
     ), queued AS (
       INSERT INTO deliveries (id, organization_id, run_id, destination_id, channel, target, label, position,
                               status, next_attempt_at, previous_run_id, created_at, updated_at)
       SELECT gen_random_uuid(), run.organization_id, run.id, targets.destination_id, targets.channel,
              targets.target, targets.label, targets.position,
              CASE WHEN task.deliver THEN 'pending' ELSE 'suppressed' END,
              CASE WHEN task.deliver THEN ${COMPLETED_AT} END,
              CASE WHEN task.deliver AND run.status = 'completed' AND task.deliver_on = 'change'
                   THEN task.last_delivered_run_id END,
              ${COMPLETED_AT}, ${COMPLETED_AT}
         FROM run CROSS JOIN targets CROSS JOIN task
     )
     SELECT * FROM run`;

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
): Promise<RunRow | undefined> {
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
 * statement (sent in a batch, statement-batch.ts). Every transaction that finishes runs takes its runs before their tasks, and a
 * batch takes each set in one fixed order, so two batches ending runs of the same tasks wait
 * for each other instead of deadlocking. A run that no longer exists (deleted with its task) is
 * simply not locked.
 */
export function lockRunsAndTasksStatement(runIds: readonly string[], taskIds: readonly string[]): Statement {
  return { sql: LOCK_RUNS_AND_TASKS, params: [runIds, taskIds] };
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
): Promise<RunRow | undefined> {
  const { sql, params } = recordLockedRunEndStatement(runId, workerId, r);
  const [row] = await tx.query<RunRow>(sql, params);
  return row;
}

/**
 * The statement of recordLockedRunEnd, for a batch (statement-batch.ts), whose row comes back as
 * JSON (runFromJson).
 */
export function recordLockedRunEndStatement(
  runId: string,
  workerId: string | null,
  r: RunResultRow,
): Statement {
  return { sql: RECORD_RUN_END, params: [runId, workerId, r.status, r.output, r.error, r.completedAt] };
}

/**
 * The notifications of runs' ends, sent once the ends have committed (a statement of its own:
 * see RunWriteBatcher): `svc_deliveries` when `deliveries` (delivery jobs were queued), and
 * `svc_runs` when one of `organizationIds` has pending runs and a free place under `orgLimit`
 * (notifyIfClaimable for several organizations).
 */
export async function notifyRunEnds(
  tx: Queryable,
  deliveries: boolean,
  organizationIds: readonly string[],
  orgLimit: number,
): Promise<void> {
  // A batch of one, so that it is planned once (its plan does not depend on the values).
  await runStatementBatch(tx, [{ sql: NOTIFY_RUN_ENDS, params: [deliveries, organizationIds, orgLimit] }]);
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
