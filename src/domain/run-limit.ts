// The plan's run limit (runsLimit per billing period) is decided when a run would be created,
// never after: a scheduled slot beyond it creates no run (it is skipped, like an overlapping
// slot), and a run now beyond it answers 403. So an organization at its limit gets no failed
// runs delivered to its destinations, and what it is told comes once per period.
import type { Queryable } from '../db/db.ts';
import { countPeriodRuns, lockLimitedOrganizations, markRunLimitReached } from '../db/sql/run-limit.ts';
import { currentPeriodEnd, currentPeriodStart } from './billing-period.ts';
import { effectiveLimits, PLAN_LIMITS, PLANS } from './plans.ts';

/** Plans whose run limit is finite (an override can still lift or set one per organization). */
export const LIMITED_PLANS = PLANS.filter((plan) => PLAN_LIMITS[plan].runsLimit !== null);

/** An organization with a run limit, as counted under its row lock. */
export interface RunAllowance {
  organizationId: string;
  runsLimit: number;
  /** Runs it may still create in the current period (0 at the limit). */
  remaining: number;
  periodStart: Date;
  periodEnd: Date;
}

/**
 * Locks the rows of the organizations among `ids` that have a run limit and counts their
 * period's runs: the map holds one allowance per limited organization; one absent from it has
 * no limit. Valid until the transaction ends: every creator of runs takes the same locks in
 * id order before counting, so runs created under an allowance never exceed the limit.
 * `alsoLock` are organizations whose rows the caller will lock later in the transaction
 * (a completed task updates its organization's row): taken here too, in the same id order, so
 * two transactions cannot each hold a row the other waits for.
 */
export async function lockRunAllowances(
  tx: Queryable,
  ids: Iterable<string>,
  now: Date,
  alsoLock: Iterable<string> = [],
): Promise<Map<string, RunAllowance>> {
  const wanted = new Set(ids);
  const lockIds = [...new Set([...wanted, ...alsoLock])].sort();
  const rows = await lockLimitedOrganizations(tx, lockIds, LIMITED_PLANS, [...alsoLock]);
  const limited = rows.flatMap((row) => {
    const { runsLimit } = effectiveLimits(row.plan, row.limit_overrides);
    if (runsLimit === null || !wanted.has(row.id)) return [];
    const periodStart = currentPeriodStart(row.billing_period_start, now);
    const periodEnd = currentPeriodEnd(row.billing_period_start, now);
    return [{ organizationId: row.id, runsLimit, periodStart, periodEnd }];
  });
  const used = await countPeriodRuns(
    tx,
    limited.map((l) => l.organizationId),
    limited.map((l) => l.periodStart),
  );
  return new Map(
    limited.map((l) => [
      l.organizationId,
      { ...l, remaining: Math.max(0, l.runsLimit - (used.get(l.organizationId) ?? 0)) },
    ]),
  );
}

/**
 * Records that these organizations were refused runs; returns the ids of those for which it
 * is the first refusal of their period (to be told now, once, by whichever process got here).
 */
export function recordRunLimitReached(
  tx: Queryable,
  refused: readonly RunAllowance[],
  now: Date,
): Promise<string[]> {
  return markRunLimitReached(
    tx,
    refused.map((a) => a.organizationId),
    refused.map((a) => a.periodStart),
    now,
  );
}

/** Why no run was created, with the period's end (when runs are possible again). */
export function runLimitMessage(a: RunAllowance): string {
  return `The plan's limit of ${a.runsLimit} runs per billing period was reached (the period started ${a.periodStart.toISOString()} and ends ${a.periodEnd.toISOString()}); upgrade the plan or wait for the next period`;
}
