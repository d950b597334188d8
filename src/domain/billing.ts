import { findOrganization } from '../db/sql/organizations.ts';
import { errors } from '../lib/errors.ts';
import type { BillingStatus } from '../schemas/billing.ts';
import type { Deps } from './deps.ts';
import { effectiveLimits } from './plans.ts';

/**
 * The organization's plan, period and limits. Usage counters (runs, tasks, users, usage cost)
 * join this as the resources that produce them are added.
 */
export async function billingStatus(deps: Pick<Deps, 'db'>, organizationId: string): Promise<BillingStatus> {
  const org = await findOrganization(deps.db, organizationId);
  if (!org) throw errors.notFound('Organization');
  const limits = effectiveLimits(org.plan, org.limit_overrides);
  const status: BillingStatus = {
    plan: org.plan,
    billingPeriodStart: org.billing_period_start.toISOString(),
    runsLimit: limits.runsLimit,
    tasksLimit: limits.tasksLimit,
    usersLimit: limits.usersLimit,
    usageCreditsCents: limits.usageCreditsCents,
  };
  if (org.payment_customer_id) status.paymentCustomerId = org.payment_customer_id;
  if (org.payment_subscription_id) status.paymentSubscriptionId = org.payment_subscription_id;
  return status;
}
