import type { Queryable } from '../db.ts';
import type { LimitOverrides, Plan } from './plan-types.ts';

/** What the run limit is decided from: an organization's row, locked. */
export interface RunLimitRow {
  id: string;
  plan: Plan;
  limit_overrides: LimitOverrides;
  billing_period_start: Date;
  run_limit_reached_at: Date | null;
}

/**
 * Locks, in id order, the rows of those organizations among `ids` whose runs may be limited
 * (an override of `runsLimit` other than null, or no override and a plan in `limitedPlans`),
 * and of those in `always`. Every creator of runs takes this lock before counting, so two
 * transactions never both see the last free run of a period (the count is made after the
 * lock, in a fresh snapshot). Organizations without a limit are not locked for it: their runs
 * need no count. NO KEY UPDATE, so rows that reference the organization are still inserted.
 */
export function lockLimitedOrganizations(
  tx: Queryable,
  ids: readonly string[],
  limitedPlans: readonly Plan[],
  always: readonly string[] = [],
): Promise<RunLimitRow[]> {
  if (!ids.length) return Promise.resolve([]);
  return tx.query<RunLimitRow>(
    `SELECT id, plan, limit_overrides, billing_period_start, run_limit_reached_at FROM organizations
      WHERE id = ANY($1::uuid[])
        AND (id = ANY($3::uuid[])
             OR CASE WHEN limit_overrides ? 'runsLimit' THEN jsonb_typeof(limit_overrides -> 'runsLimit') <> 'null'
                     ELSE plan = ANY($2::text[]) END)
      ORDER BY id
      FOR NO KEY UPDATE`,
    [ids, limitedPlans, always],
  );
}

/** Counted runs of each organization since its period start (`since`, in the same order). */
export async function countPeriodRuns(
  tx: Queryable,
  ids: readonly string[],
  since: readonly Date[],
): Promise<Map<string, number>> {
  if (!ids.length) return new Map();
  const rows = await tx.query<{ id: string; n: number }>(
    `SELECT o.id, (SELECT count(*)::int FROM usage_ledger u
                    WHERE u.organization_id = o.id AND u.counted AND u.created_at >= o.since) AS n
       FROM unnest($1::uuid[], $2::timestamptz[]) AS o(id, since)`,
    [ids, since],
  );
  return new Map(rows.map((r) => [r.id, r.n]));
}

/**
 * Records that each organization was refused a run in the period starting at its `since`,
 * unless that was already recorded in that period. Returns the organizations recorded now:
 * those to be told (once per period, whichever process refuses).
 */
export async function markRunLimitReached(
  tx: Queryable,
  ids: readonly string[],
  since: readonly Date[],
  now: Date,
): Promise<string[]> {
  if (!ids.length) return [];
  const rows = await tx.query<{ id: string }>(
    `UPDATE organizations o SET run_limit_reached_at = $3
       FROM unnest($1::uuid[], $2::timestamptz[]) AS p(id, since)
      WHERE o.id = p.id AND (o.run_limit_reached_at IS NULL OR o.run_limit_reached_at < p.since)
      RETURNING o.id`,
    [ids, since, now],
  );
  return rows.map((r) => r.id);
}
