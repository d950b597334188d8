import { findOrganization } from '../db/sql/organizations.ts';
import { periodUsage } from '../db/sql/usage.ts';
import { errors } from '../lib/errors.ts';
import type { BillingStatus } from '../schemas/billing.ts';
import { currentPeriodStart } from './billing-period.ts';
import type { Deps } from './deps.ts';
import { effectiveLimits } from './plans.ts';
import { countUsers } from './users.ts';

/**
 * The organization's plan, period, limits and usage. The period is the current monthly one
 * (billing-period.ts); `runsUsed` counts the ledger's runs created in it (deleted runs
 * included, runs refused by the run limit not); `tasksCount` is the active tasks;
 * `usageCostCents` is the period's run cost beyond the plan's credits; `usersCount` is the
 * organization's users.
 */
export async function billingStatus(
  deps: Pick<Deps, 'db' | 'clock'>,
  organizationId: string,
): Promise<BillingStatus> {
  const org = await findOrganization(deps.db, organizationId);
  if (!org) throw errors.notFound('Organization');
  const limits = effectiveLimits(org.plan, org.limit_overrides);
  const periodStart = currentPeriodStart(org.billing_period_start, deps.clock.now());
  const usage = await periodUsage(deps.db, organizationId, periodStart);
  const status: BillingStatus = {
    plan: org.plan,
    billingPeriodStart: periodStart.toISOString(),
    runsLimit: limits.runsLimit,
    runsUsed: usage.runs_used,
    tasksCount: usage.active_tasks,
    tasksLimit: limits.tasksLimit,
    usersCount: await countUsers(deps.db, organizationId),
    usersLimit: limits.usersLimit,
    usageCostCents: Math.max(0, Number(usage.cost_cents) - limits.usageCreditsCents),
    usageCreditsCents: limits.usageCreditsCents,
  };
  if (org.payment_customer_id) status.paymentCustomerId = org.payment_customer_id;
  if (org.payment_subscription_id) status.paymentSubscriptionId = org.payment_subscription_id;
  // Told once per period: the first refusal of the period is recorded (domain/run-limit.ts).
  if (org.run_limit_reached_at && org.run_limit_reached_at >= periodStart) {
    status.runsLimitReachedAt = org.run_limit_reached_at.toISOString();
  }
  return status;
}
