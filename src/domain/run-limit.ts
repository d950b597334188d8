import type { Queryable } from '../db/db.ts';
import type { RunOrganization } from '../db/sql/run-context.ts';
import type { RunRow } from '../db/sql/runs.ts';
import { runsBefore } from '../db/sql/usage.ts';
import { currentPeriodEnd, currentPeriodStart } from './billing-period.ts';
import { effectiveLimits } from './plans.ts';

/**
 * Why the run may not execute under its organization's plan, or undefined when it may. A run
 * counts in the billing period it was created in, and its place there is fixed by creation
 * order, so every worker (and a retry of the same run) reaches the same answer; the run's
 * plan is read now, so an upgrade lifts the limit for runs not yet executed.
 */
export async function runLimitRefusal(
  db: Queryable,
  run: Pick<RunRow, 'id' | 'organization_id' | 'created_at'>,
  org: Pick<RunOrganization, 'plan' | 'limit_overrides' | 'billing_period_start'>,
): Promise<string | undefined> {
  const { runsLimit } = effectiveLimits(org.plan, org.limit_overrides);
  if (runsLimit === null) return undefined;
  const since = currentPeriodStart(org.billing_period_start, run.created_at);
  if ((await runsBefore(db, run, since)) < runsLimit) return undefined;
  const until = currentPeriodEnd(org.billing_period_start, run.created_at);
  return `The run was not executed: the plan's limit of ${runsLimit} runs per billing period was reached (the period started ${since.toISOString()} and ends ${until.toISOString()}); upgrade the plan or wait for the next period`;
}
