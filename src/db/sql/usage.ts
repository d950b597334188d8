import type { Queryable, Statement } from '../db.ts';

/**
 * The usage ledger: one row per run, written with the run (see insertRun). Its tokens and cost
 * grow with each model call as the call is answered (recordModelCallsStatement); its status is set when
 * the run ends. It has no foreign key to tasks or runs, so deleting either never lowers usage.
 */
export interface ModelCallUsage {
  /** Chosen by the worker before the first attempt to write, so a retried write counts once. */
  id: string;
  runId: string;
  /** The provider's id of the answer, when it gave one. */
  providerCallId: string | null;
  tokensUsed: number;
  costCents: number;
}

// Built once (statements are named by their text).
const RECORD_MODEL_CALLS = `WITH input AS (
       SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::numeric[])
         AS c(id, run_id, provider_call_id, tokens_used, cost_cents)
     ), held AS (
       SELECT id FROM runs WHERE id = ANY($2::uuid[]) ORDER BY id FOR NO KEY UPDATE
     ), call AS (
       INSERT INTO usage_calls (id, run_id, organization_id, provider_call_id, tokens_used, cost_cents, created_at)
       SELECT c.id, u.run_id, u.organization_id, c.provider_call_id, c.tokens_used, c.cost_cents, statement_timestamp()
         FROM input c JOIN usage_ledger u ON u.run_id = c.run_id
        -- Evaluated once, before the first ledger row is read: the runs' rows are locked first.
        WHERE (SELECT count(*) FROM held) >= 0
       ON CONFLICT (id) DO NOTHING
       RETURNING run_id, tokens_used, cost_cents
     ), added AS (
       SELECT run_id, sum(tokens_used) AS tokens_used, sum(cost_cents) AS cost_cents FROM call GROUP BY run_id
     ), ledger AS (
       -- A run's tokens stop at the column's maximum rather than fail the write.
       UPDATE usage_ledger u SET tokens_used = least(u.tokens_used::bigint + a.tokens_used, 2147483647),
              cost_cents = u.cost_cents + a.cost_cents
         FROM added a WHERE u.run_id = a.run_id
       RETURNING u.run_id, u.tokens_used, u.cost_cents
     )
     -- The run's own figures brought up to its ledger row's (greatest: never lowered), but for a
     -- run whose end follows in the transaction and will take them (still held by its worker).
     UPDATE runs r SET cost_cents = greatest(r.cost_cents, l.cost_cents),
            tokens_used = greatest(r.tokens_used, l.tokens_used)
       FROM ledger l
      WHERE r.id = l.run_id AND (r.cost_cents < l.cost_cents OR r.tokens_used < l.tokens_used)
        AND NOT EXISTS (SELECT 1 FROM unnest($6::uuid[], $7::text[]) e(run_id, worker_id)
                         WHERE e.run_id = r.id AND r.status = 'running' AND r.lease_owner = e.worker_id)
     -- Rows returned, so that the statement can be one of a batch (Db.batch).
     RETURNING r.id`;

/**
 * Adds model calls' tokens and cost to their runs' ledger rows, with each call's own row (whose
 * id makes a repeated write count once), and brings each run's own tokens and cost up to its
 * ledger row's, in one statement. A call of a run without a ledger row is not recorded.
 *
 * The runs' rows are locked first, in id order, before the ledger rows: a cancel and a run's end
 * take a run's row before its ledger row, and the opposite order could deadlock with them. One
 * statement, sent in a batch (Db.batch).
 *
 * `endingNext`: runs whose end (recordLockedRunEndsStatement, which sets a run's tokens and cost
 * from its ledger row) follows in the same transaction, each with the worker that must hold it;
 * the run's own figures are left to that end where it will apply, saving a second version of
 * the run's row.
 */
export function recordModelCallsStatement(
  calls: readonly ModelCallUsage[],
  endingNext: readonly { runId: string; workerId: string }[] = [],
): Statement {
  return {
    sql: RECORD_MODEL_CALLS,
    params: [
      calls.map((c) => c.id),
      calls.map((c) => c.runId),
      calls.map((c) => c.providerCallId),
      calls.map((c) => Math.round(c.tokensUsed)),
      calls.map((c) => c.costCents),
      endingNext.map((e) => e.runId),
      endingNext.map((e) => e.workerId),
    ],
  };
}

/**
 * The ledger status of a run that was deleted (with its task) while a worker held it: the
 * worker's outcome, since no run row is left to carry it. Does nothing while the run exists.
 */
export async function settleDeletedRun(
  db: Queryable,
  runId: string,
  status: 'completed' | 'failed',
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE usage_ledger SET status = $2
      WHERE run_id = $1 AND status IN ('pending', 'running')
        AND NOT EXISTS (SELECT 1 FROM runs WHERE id = $1)
     RETURNING run_id`,
    [runId, status],
  );
  return rows.length > 0;
}

export interface OrganizationStatsRow {
  total_tasks: number;
  active_tasks: number;
  total_runs: number;
  successful_runs: number;
  failed_runs: number;
  total_cost_cents: number;
  total_tokens_used: number;
}

/** Task counts (tasks that exist now) and all-time run figures (from the ledger), one statement. */
export async function organizationStats(
  db: Queryable,
  organizationId: string,
): Promise<OrganizationStatsRow> {
  const [row] = await db.query<OrganizationStatsRow>(
    `SELECT
       (SELECT count(*)::int FROM tasks WHERE organization_id = $1) AS total_tasks,
       (SELECT count(*)::int FROM tasks WHERE organization_id = $1 AND status = 'active') AS active_tasks,
       count(*)::int AS total_runs,
       (count(*) FILTER (WHERE status = 'completed'))::int AS successful_runs,
       (count(*) FILTER (WHERE status = 'failed'))::int AS failed_runs,
       coalesce(sum(cost_cents), 0)::numeric AS total_cost_cents,
       coalesce(sum(tokens_used), 0)::bigint AS total_tokens_used
     FROM usage_ledger WHERE organization_id = $1`,
    [organizationId],
  );
  if (!row) throw new Error('stats query returned no row');
  return row;
}

export interface PeriodUsageRow {
  runs_used: number;
  cost_cents: number;
  active_tasks: number;
}

/**
 * Runs and cost recorded since `since` (the billing period start), and the active task count.
 * Runs refused by the run limit do not count.
 */
export async function periodUsage(
  db: Queryable,
  organizationId: string,
  since: Date,
): Promise<PeriodUsageRow> {
  const [row] = await db.query<PeriodUsageRow>(
    `SELECT
       count(*)::int AS runs_used,
       coalesce(sum(cost_cents), 0)::numeric AS cost_cents,
       (SELECT count(*)::int FROM tasks WHERE organization_id = $1 AND status = 'active') AS active_tasks
     FROM usage_ledger WHERE organization_id = $1 AND created_at >= $2 AND counted`,
    [organizationId, since],
  );
  if (!row) throw new Error('usage query returned no row');
  return row;
}

export interface DailyUsageRow {
  day: Date;
  runs: number;
  cost_cents: number;
}

/** Runs and cost per UTC day since `since`, from the ledger (days without runs are absent). */
export function dailyUsage(db: Queryable, organizationId: string, since: Date): Promise<DailyUsageRow[]> {
  return db.query<DailyUsageRow>(
    `SELECT date_trunc('day', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS day,
            count(*)::int AS runs, coalesce(sum(cost_cents), 0)::float8 AS cost_cents
       FROM usage_ledger WHERE organization_id = $1 AND created_at >= $2 AND counted
      GROUP BY 1 ORDER BY 1`,
    [organizationId, since],
  );
}
