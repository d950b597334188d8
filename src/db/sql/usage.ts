import type { Queryable } from '../db.ts';

/**
 * The usage ledger: one row per run, written with the run (see insertRun). Its tokens and cost
 * grow with each model call as the call is answered (recordModelCall); its status is set when
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

/**
 * Adds one model call's tokens and cost to its run's ledger row, in one statement with the
 * call's own row (whose id makes a repeated write count once). Only the ledger row is locked,
 * so it never waits on a run's row. False when the call was already recorded or the run has no
 * ledger row.
 */
export async function recordModelCall(db: Queryable, call: ModelCallUsage): Promise<boolean> {
  const rows = await db.query(
    `WITH call AS (
       INSERT INTO usage_calls (id, run_id, organization_id, provider_call_id, tokens_used, cost_cents, created_at)
       SELECT $1, u.run_id, u.organization_id, $3, $4, $5, statement_timestamp()
         FROM usage_ledger u WHERE u.run_id = $2
       ON CONFLICT (id) DO NOTHING
       RETURNING run_id, tokens_used, cost_cents
     )
     -- A run's tokens stop at the column's maximum rather than fail the write.
     UPDATE usage_ledger u SET tokens_used = least(u.tokens_used::bigint + call.tokens_used, 2147483647),
            cost_cents = u.cost_cents + call.cost_cents
       FROM call WHERE u.run_id = call.run_id
     RETURNING u.run_id`,
    [call.id, call.runId, call.providerCallId, Math.round(call.tokensUsed), call.costCents],
  );
  return rows.length > 0;
}

/**
 * Brings the run's own tokens and cost up to its ledger row's (a separate statement, so that
 * only the run's row is locked; `greatest` keeps a late, older copy from lowering them).
 */
export async function copyUsageToRun(db: Queryable, runId: string): Promise<void> {
  await db.query(
    `UPDATE runs r SET cost_cents = greatest(r.cost_cents, u.cost_cents),
            tokens_used = greatest(r.tokens_used, u.tokens_used)
       FROM usage_ledger u
      WHERE r.id = $1 AND u.run_id = r.id
        AND (r.cost_cents < u.cost_cents OR r.tokens_used < u.tokens_used)`,
    [runId],
  );
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
