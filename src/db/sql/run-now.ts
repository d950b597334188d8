import type { Db, Statement } from '../db.ts';
import {
  type ClaimedRun,
  type ClaimOptions,
  claimArgs,
  leaseUntil,
  lockOrganizationClaimsStatement,
} from './run-claim.ts';
import { RUN_CONTEXT_COLUMNS, type RunContextRow, runContextFromJson } from './run-context.ts';
import {
  insertParams,
  insertRunStatement,
  type NewRun,
  type RunRow,
  runFromJson,
  SELECT_RUN_NOTIFIED,
} from './runs.ts';
import { LOCK_TASK_SQL } from './tasks.ts';

/** What run now's one round trip made: the run as created, and the claim of it, if one was made. */
export interface CreatedRun {
  run: RunRow;
  /** Claimed in the same transaction by this process's worker (see `claim` below). */
  claimed: ClaimedRun | undefined;
}

/**
 * Run now's common case in one round trip (Db.batch): the task's row locked, then the
 * run inserted with its ledger row, only when nothing could refuse it: no run of the task in
 * flight (read after the lock is held, so a run created by a run now that held it before is
 * seen), no monthly cost limit on the task, and an organization whose plan and overrides set no
 * run limit. Undefined when any of that does not hold, or the task is not the organization's:
 * the caller then decides in a transaction of its own, which checks everything again and says
 * why. The conditions are the refusals' own or stricter, so a run created here is one the
 * transaction would have created.
 *
 * `claim`: this process's worker has a place reserved for the run, and the run is inserted
 * already claimed by that worker (running, under its lease, with its context) when a claim
 * would take it: under the organization's claim lock (taken by the statement before, as
 * a claim takes it), no run of the organization is pending (an older one would be
 * claimed first: the fair order) and the organization has a place under `orgLimit`. That saves
 * the NOTIFY, the worker's claim round trip, and the run's pending row version with its index
 * entries. A run that is not claimed, and every run created without `claim`, is inserted
 * pending and announced by NOTIFY svc_runs at the commit. The answer's `run` is the run as
 * created, pending, as run now always answers.
 */
export async function insertRunIfUnrestricted(
  db: Db,
  row: NewRun,
  limitedPlans: readonly string[],
  claim?: ClaimOptions,
): Promise<CreatedRun | undefined> {
  const lock: Statement = { sql: LOCK_TASK_SQL, params: [row.organizationId, row.taskId] };
  if (!claim) {
    const [, run] = await db.batch([
      lock,
      { sql: INSERT_UNRESTRICTED_NOTIFY_SQL, params: [...insertParams(row), limitedPlans] },
    ]);
    return run ? { run: runFromJson(run as unknown as RunRow), claimed: undefined } : undefined;
  }
  const [, , made] = await db.batch([
    lock,
    lockOrganizationClaimsStatement(row.organizationId),
    {
      sql: INSERT_UNRESTRICTED_CLAIMED_SQL,
      params: [...insertParams(row), limitedPlans, claimArgs({ ...claim, limit: 1 })],
    },
  ]);
  if (!made) return undefined;
  const { context, ...fields } = made as unknown as RunRow & { context: RunContextRow | null };
  const run = runFromJson(fields as RunRow);
  if (!context) return { run, claimed: undefined };
  return { run: asCreated(run), claimed: { run, context: runContextFromJson(context) } };
}

/** A run claimed at its creation, as it would have been created pending. */
function asCreated(run: RunRow): RunRow {
  return {
    ...run,
    status: 'pending',
    lease_owner: null,
    lease_expires_at: null,
    attempts: 0,
    started_at: null,
  };
}

const UNRESTRICTED = `
          AND t.monthly_cost_limit_cents IS NULL
          -- No run limit: an override's (null: unlimited), else the plan's.
          AND CASE WHEN o.limit_overrides ? 'runsLimit' THEN jsonb_typeof(o.limit_overrides -> 'runsLimit') = 'null'
                   ELSE o.plan <> ALL ($11::text[]) END
          AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.status IN ('pending', 'running'))`;

const INSERT_UNRESTRICTED_NOTIFY_SQL = `${insertRunStatement('tasks t JOIN organizations o ON o.id = t.organization_id', UNRESTRICTED)} ${SELECT_RUN_NOTIFIED}`;

/** $12: the claim's options (claimArgs). */
const CLAIM_ARGS = '($12::jsonb)';

/**
 * The insert of INSERT_UNRESTRICTED_NOTIFY_SQL, claimed at once when a claim would take the run
 * (see insertRunIfUnrestricted; the statement before holds the organization's claim lock). The
 * pending runs are looked for by runs_pending_org_idx's key, as the claim reads them. Each row
 * returned carries `context` (null: the run stays pending, and its NOTIFY goes at the commit).
 */
const INSERT_UNRESTRICTED_CLAIMED_SQL = `${insertRunStatement(
  'tasks t JOIN organizations o ON o.id = t.organization_id CROSS JOIN claim c',
  UNRESTRICTED,
  {
    before: `claim AS MATERIALIZED (
       SELECT coalesce((${CLAIM_ARGS}->>'now')::timestamptz, clock_timestamp()) AS now,
              (SELECT 1 FROM runs WHERE organization_id = $2 AND status = 'pending'
                ORDER BY organization_id, created_at, id LIMIT 1) IS NULL
              AND (SELECT count(*) FROM runs WHERE organization_id = $2 AND status = 'running')
                  < (${CLAIM_ARGS}->>'orgLimit')::int AS claimable
     )`,
    status: `CASE WHEN c.claimable THEN 'running' ELSE 'pending' END`,
    lease: [
      `CASE WHEN c.claimable THEN ${CLAIM_ARGS}->>'workerId' END`,
      `CASE WHEN c.claimable THEN ${leaseUntil('c.now', CLAIM_ARGS)} END`,
      'CASE WHEN c.claimable THEN 1 ELSE 0 END',
      'CASE WHEN c.claimable THEN c.now END',
    ],
  },
)}
     SELECT run.*, row_to_json(ctx) AS context
       FROM run
       LEFT JOIN LATERAL (SELECT ${RUN_CONTEXT_COLUMNS} FROM tasks t WHERE t.id = run.task_id) ctx
         ON run.status = 'running'
       LEFT JOIN LATERAL (SELECT pg_notify('svc_runs', run.id::text) WHERE run.status = 'pending') notified
         ON true`;
