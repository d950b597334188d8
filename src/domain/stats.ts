import { organizationStats } from '../db/sql/usage.ts';
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
