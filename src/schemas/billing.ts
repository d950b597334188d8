import { type Static, Type } from 'typebox';
import { PLANS } from './bounds.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

/** Billing status, field for field as the interface specification gives it (all optional). */
export const BillingStatus = Type.Object(
  {
    plan: Type.Optional(StringEnum(PLANS)),
    billingPeriodStart: Type.Optional(DateTime),
    runsLimit: Type.Optional(
      Nullable(Type.Number({ description: 'Maximum runs allowed; null for unlimited' })),
    ),
    runsUsed: Type.Optional(Type.Number({ description: 'Task runs used this billing period' })),
    tasksCount: Type.Optional(Type.Number({ description: 'Current number of active tasks' })),
    tasksLimit: Type.Optional(Type.Number()),
    usersCount: Type.Optional(Type.Number()),
    usersLimit: Type.Optional(Type.Number()),
    usageCostCents: Type.Optional(Type.Number({ description: 'Usage-based charges this period' })),
    usageCreditsCents: Type.Optional(Type.Number({ description: 'Usage credits included in the plan' })),
    paymentCustomerId: Type.Optional(Type.String()),
    paymentSubscriptionId: Type.Optional(Type.String()),
    runsLimitReachedAt: Type.Optional(
      Type.String({
        format: 'date-time',
        description:
          "When the plan's run limit first refused a run in the current billing period (a schedule slot skipped or a run now refused); absent while it has not",
      }),
    ),
  },
  { $id: 'BillingStatus' },
);
export type BillingStatus = Static<typeof BillingStatus>;

export const BillingSessionBody = Type.Object({ organizationId: Uuid }, { additionalProperties: false });

/** The answer of checkout and portal: the address of the payment provider's session. */
export const BillingSession = Type.Object(
  { url: Type.Optional(Type.String({ description: "The payment provider's session page" })) },
  { $id: 'BillingSession' },
);
