import type { Queryable } from '../db.ts';

/**
 * The usage ledger: one row per run, written with the run (see insertRun) and updated when the
 * run ends. It has no foreign key to tasks or runs, so deleting either never lowers usage.
 */
export interface RunOutcome {
  status: 'running' | 'completed' | 'failed';
  costCents: number;
  tokensUsed: number;
}

/** Records a run's status, cost and tokens in its ledger row. False when the run has no row. */
export async function recordRunOutcome(db: Queryable, runId: string, outcome: RunOutcome): Promise<boolean> {
  const rows = await db.query(
    `UPDATE usage_ledger SET status = $2, cost_cents = $3, tokens_used = $4
     WHERE run_id = $1 RETURNING run_id`,
    [runId, outcome.status, outcome.costCents, Math.round(outcome.tokensUsed)],
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

/**
 * Where a run stands in its organization's period: how many counted runs of the period were
 * created before it (ties broken by id, so every worker computes the same order).
 */
export async function runsBefore(
  db: Queryable,
  run: { id: string; organization_id: string; created_at: Date },
  since: Date,
): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM usage_ledger
      WHERE organization_id = $1 AND counted AND created_at >= $2
        AND (created_at, run_id) < ($3::timestamptz, $4::uuid)`,
    [run.organization_id, since, run.created_at, run.id],
  );
  return row?.n ?? 0;
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
