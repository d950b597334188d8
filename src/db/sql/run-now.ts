import type { Queryable } from '../db.ts';
import { type ClaimedRun, type ClaimOptions, claimCreatedRunStatements, claimedRunOf } from './run-claim.ts';
import {
  insertParams,
  insertRunStatement,
  type NewRun,
  type RunRow,
  runFromJson,
  SELECT_RUN_NOTIFIED,
} from './runs.ts';
import { runStatementBatch, type Statement } from './statement-batch.ts';
import { LOCK_TASK_SQL } from './tasks.ts';

/** What run now's one round trip made: the run as created, and the claim of it, if one was made. */
export interface CreatedRun {
  run: RunRow;
  /** Claimed in the same transaction by this process's worker (see `claim` below). */
  claimed: ClaimedRun | undefined;
}

/**
 * Run now's common case in one round trip (runStatementBatch): the task's row locked, then the
 * run inserted with its ledger row, only when nothing could refuse it: no run of the task in
 * flight (read after the lock is held, so a run created by a run now that held it before is
 * seen), no monthly cost limit on the task, and an organization whose plan and overrides set no
 * run limit. Undefined when any of that does not hold, or the task is not the organization's:
 * the caller then decides in a transaction of its own, which checks everything again and says
 * why. The conditions are the refusals' own or stricter, so a run created here is one the
 * transaction would have created.
 *
 * `claim`: this process's worker has a place reserved for the run, and the same transaction
 * claims it for that worker (claimCreatedRunStatements: under the organization's claim lock, in
 * the fair order, within its limit), which saves the NOTIFY and the worker's claim round trip.
 * A run that is not claimed (an older run of the organization waits, or it is at its limit),
 * and every run created without `claim`, is announced by NOTIFY svc_runs at the commit.
 */
export async function insertRunIfUnrestricted(
  db: Queryable,
  row: NewRun,
  limitedPlans: readonly string[],
  claim?: ClaimOptions,
): Promise<CreatedRun | undefined> {
  const lock: Statement = { sql: LOCK_TASK_SQL, params: [row.organizationId, row.taskId] };
  const insert = (sql: string): Statement => ({ sql, params: [...insertParams(row), limitedPlans] });
  if (!claim) {
    const [, run] = await runStatementBatch(db, [lock, insert(INSERT_UNRESTRICTED_NOTIFY_SQL)]);
    return run ? { run: runFromJson(run as unknown as RunRow), claimed: undefined } : undefined;
  }
  const [, run, , claimed] = await runStatementBatch(db, [
    lock,
    insert(INSERT_UNRESTRICTED_SQL),
    ...claimCreatedRunStatements(claim, row.organizationId, row.id),
    { sql: NOTIFY_IF_PENDING_SQL, params: [row.id] },
  ]);
  return run ? { run: runFromJson(run as unknown as RunRow), claimed: claimedRunOf(claimed) } : undefined;
}

const INSERT_UNRESTRICTED = insertRunStatement(
  'tasks t JOIN organizations o ON o.id = t.organization_id',
  `
          AND t.monthly_cost_limit_cents IS NULL
          -- No run limit: an override's (null: unlimited), else the plan's.
          AND CASE WHEN o.limit_overrides ? 'runsLimit' THEN jsonb_typeof(o.limit_overrides -> 'runsLimit') = 'null'
                   ELSE o.plan <> ALL ($11::text[]) END
          AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.status IN ('pending', 'running'))`,
);
const INSERT_UNRESTRICTED_SQL = `${INSERT_UNRESTRICTED} SELECT * FROM run`;
const INSERT_UNRESTRICTED_NOTIFY_SQL = `${INSERT_UNRESTRICTED} ${SELECT_RUN_NOTIFIED}`;
/** After the claim: a run it left pending is announced (sent at the commit) for any worker. */
const NOTIFY_IF_PENDING_SQL = `SELECT pg_notify('svc_runs', id::text) AS notified FROM runs
  WHERE id = $1 AND status = 'pending'`;
