import { dailyUsage, organizationStats } from '../db/sql/usage.ts';
import type { Stats } from '../schemas/stats.ts';
import type { Deps } from './deps.ts';

/**
 * Usage statistics. Task counts are of the tasks that exist now; run figures come from the
 * usage ledger, so deleting a task or a run never lowers them.
 */
export async function organizationStatistics(deps: Pick<Deps, 'db'>, organizationId: string): Promise<Stats> {
  const row = await organizationStats(deps.db, organizationId);
  return {
    activeTasks: row.active_tasks,
    totalTasks: row.total_tasks,
    totalRuns: row.total_runs,
    successfulRuns: row.successful_runs,
    failedRuns: row.failed_runs,
    totalCostCents: Number(row.total_cost_cents),
    totalTokensUsed: Number(row.total_tokens_used),
  };
}

/** One UTC day of counted runs and their cost, from the usage ledger. */
export interface DayOfUsage {
  /** YYYY-MM-DD, UTC. */
  day: string;
  runs: number;
  costCents: number;
}

/** The last `days` UTC days up to today, oldest first; a day without runs is there with zeros. */
export async function lastDaysOfUsage(
  deps: Pick<Deps, 'db' | 'clock'>,
  organizationId: string,
  days: number,
): Promise<DayOfUsage[]> {
  const today = new Date(new Date(deps.clock.now()).setUTCHours(0, 0, 0, 0));
  const since = new Date(today.getTime() - (days - 1) * 86_400_000);
  const rows = await dailyUsage(deps.db, organizationId, since);
  const byDay = new Map(rows.map((r) => [new Date(r.day).toISOString().slice(0, 10), r]));
  return Array.from({ length: days }, (_, i) => {
    const day = new Date(since.getTime() + i * 86_400_000).toISOString().slice(0, 10);
    const r = byDay.get(day);
    return { day, runs: r?.runs ?? 0, costCents: Number(r?.cost_cents ?? 0) };
  });
}
