import { findOrganization } from '../db/sql/organizations.ts';
import { periodUsage } from '../db/sql/usage.ts';
import { errors } from '../lib/errors.ts';
import type { BillingStatus } from '../schemas/billing.ts';
import type { Deps } from './deps.ts';
import { effectiveLimits } from './plans.ts';

/**
 * The organization's plan, period, limits and usage. `runsUsed` counts the ledger's runs since
 * the period start (deleted runs included); `tasksCount` is the active tasks; `usageCostCents` is
 * the period's run cost beyond the plan's credits. `usersCount` arrives with users.
 */
export async function billingStatus(deps: Pick<Deps, 'db'>, organizationId: string): Promise<BillingStatus> {
  const org = await findOrganization(deps.db, organizationId);
  if (!org) throw errors.notFound('Organization');
  const limits = effectiveLimits(org.plan, org.limit_overrides);
  const usage = await periodUsage(deps.db, organizationId, org.billing_period_start);
  const status: BillingStatus = {
    plan: org.plan,
    billingPeriodStart: org.billing_period_start.toISOString(),
    runsLimit: limits.runsLimit,
    runsUsed: usage.runs_used,
    tasksCount: usage.active_tasks,
    tasksLimit: limits.tasksLimit,
    usersLimit: limits.usersLimit,
    usageCostCents: Math.max(0, Number(usage.cost_cents) - limits.usageCreditsCents),
    usageCreditsCents: limits.usageCreditsCents,
  };
  if (org.payment_customer_id) status.paymentCustomerId = org.payment_customer_id;
  if (org.payment_subscription_id) status.paymentSubscriptionId = org.payment_subscription_id;
  return status;
}
