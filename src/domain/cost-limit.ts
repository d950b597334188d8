// A task's monthly cost limit: once the task's cost in its organization's current billing
// period (the usage ledger) reaches `monthlyCostLimitCents`, its scheduled slots are skipped
// (`skipped_budget` slot records) and Run now answers 409, until the next period. Decided when a
// run would be created, with the task's row locked and no run of it in flight, so the cost it
// is decided on is not moving. The first refusal of a period is recorded on the task's row
// (`cost_limit_reached_at`), so its destinations are told once per period.
import type { Queryable } from '../db/db.ts';
import {
  billingAnchors,
  markCostLimitReached,
  type TaskCostRow,
  taskCostSince,
} from '../db/sql/cost-limit.ts';
import type { TaskRow } from '../db/sql/tasks.ts';
import { currentPeriodEnd, currentPeriodStart } from './billing-period.ts';
import type { Deps } from './deps.ts';
import { tellTaskDestinations } from './task-notices.ts';

/** A task's cost limit in the organization's current period. */
export interface CostLimit {
  cents: number;
  periodStart: Date;
  periodEnd: Date;
}

/** The cost limits of those `tasks` that have one, by task id, for the periods `now` is in. */
export async function costLimitsOf(
  tx: Queryable,
  tasks: readonly Pick<TaskRow, 'id' | 'organization_id' | 'monthly_cost_limit_cents'>[],
  now: Date,
): Promise<Map<string, CostLimit>> {
  const limited = tasks.filter((t) => t.monthly_cost_limit_cents !== null);
  const anchors = await billingAnchors(tx, [...new Set(limited.map((t) => t.organization_id))]);
  const limits = new Map<string, CostLimit>();
  for (const t of limited) {
    const anchor = anchors.get(t.organization_id);
    if (!anchor || t.monthly_cost_limit_cents === null) continue;
    limits.set(t.id, {
      cents: t.monthly_cost_limit_cents,
      periodStart: currentPeriodStart(anchor, now),
      periodEnd: currentPeriodEnd(anchor, now),
    });
  }
  return limits;
}

/** What the task's destinations are to be told, once per period. */
export interface CostLimitNotice {
  organizationId: string;
  taskId: string;
  limitCents: number;
  periodStart: Date;
  periodEnd: Date;
  /** What met the limit first in this period. */
  by: 'schedule' | 'run_now';
}

/**
 * The one place where a task's "cost limit reached" notice is queued: called once per task and
 * billing period, inside the transaction that recorded it (so a queued notice commits with it,
 * and is gone if that rolls back). It logs one warn line and tells the task's destinations
 * (`task.cost_limit_reached`, through the delivery queue).
 */
export async function queueCostLimitNotice(
  deps: Pick<Deps, 'log' | 'clock'>,
  tx: Queryable,
  notice: CostLimitNotice,
): Promise<void> {
  const costCents = await taskCostSince(tx, notice.taskId, notice.periodStart);
  await tellTaskDestinations(tx, deps.clock, notice.taskId, {
    kind: 'task.cost_limit_reached',
    payload: {
      limitCents: notice.limitCents,
      costCents,
      periodStart: notice.periodStart.toISOString(),
      periodEnd: notice.periodEnd.toISOString(),
    },
  });
  deps.log.warn(
    {
      organizationId: notice.organizationId,
      taskId: notice.taskId,
      monthlyCostLimitCents: notice.limitCents,
      periodStart: notice.periodStart,
      periodEnd: notice.periodEnd,
      by: notice.by,
    },
    'task reached its monthly cost limit: its schedule slots get no runs and Run now is refused until the billing period ends',
  );
}

/** Why no run was created, with when runs are possible again. */
export function costLimitMessage(limit: CostLimit, spent: number): string {
  return `The task's monthly cost limit of ${limit.cents} cents was reached (${spent} cents in the billing period that started ${limit.periodStart.toISOString()}); runs are possible again when the period ends at ${limit.periodEnd.toISOString()}, or raise or clear monthlyCostLimitCents`;
}

/**
 * Run now against the task's cost limit (`row`, read with the task's row lock held: taskRunState).
 * The caller holds the lock and has seen no run of the task in flight. Returns the refusal's
 * message when the limit holds (recording the first refusal of the period and queueing its
 * notice), else undefined.
 */
export async function refuseOverCostLimit(
  deps: Pick<Deps, 'log' | 'clock'>,
  tx: Queryable,
  organizationId: string,
  taskId: string,
  row: TaskCostRow,
  now: Date,
): Promise<string | undefined> {
  if (row.monthly_cost_limit_cents === null) return undefined;
  const limit: CostLimit = {
    cents: row.monthly_cost_limit_cents,
    periodStart: currentPeriodStart(row.billing_period_start, now),
    periodEnd: currentPeriodEnd(row.billing_period_start, now),
  };
  const spent = await taskCostSince(tx, taskId, limit.periodStart);
  if (spent < limit.cents) return undefined;
  if (await markCostLimitReached(tx, taskId, limit.periodStart, now)) {
    await queueCostLimitNotice(deps, tx, {
      organizationId,
      taskId,
      limitCents: limit.cents,
      periodStart: limit.periodStart,
      periodEnd: limit.periodEnd,
      by: 'run_now',
    });
  }
  return costLimitMessage(limit, spent);
}
