import type { Queryable } from '../db.ts';

/** Each organization's billing anchor (its periods are counted from it). */
export async function billingAnchors(db: Queryable, ids: readonly string[]): Promise<Map<string, Date>> {
  if (!ids.length) return new Map();
  const rows = await db.query<{ id: string; billing_period_start: Date }>(
    'SELECT id, billing_period_start FROM organizations WHERE id = ANY($1::uuid[])',
    [ids],
  );
  return new Map(rows.map((r) => [r.id, r.billing_period_start]));
}

export interface TaskCostRow {
  monthly_cost_limit_cents: number | null;
  billing_period_start: Date;
}

/** A task's cost limit with its organization's anchor; undefined when the task is not the organization's. */
export async function taskCostLimit(
  db: Queryable,
  organizationId: string,
  taskId: string,
): Promise<TaskCostRow | undefined> {
  const [row] = await db.query<TaskCostRow>(
    `SELECT t.monthly_cost_limit_cents, o.billing_period_start
       FROM tasks t JOIN organizations o ON o.id = t.organization_id
      WHERE t.organization_id = $1 AND t.id = $2`,
    [organizationId, taskId],
  );
  return row;
}

/** The task's cost (cents) on the usage ledger since `since`: runs created in the period. */
export async function taskCostSince(db: Queryable, taskId: string, since: Date): Promise<number> {
  const [row] = await db.query<{ spent: number }>(
    `SELECT coalesce(sum(cost_cents), 0)::numeric AS spent FROM usage_ledger
      WHERE task_id = $1 AND created_at >= $2`,
    [taskId, since],
  );
  return row?.spent ?? 0;
}

/**
 * Records that the task's cost limit held in the period starting at `since`, unless that was
 * already recorded in it. True when recorded now: the first time in the period (the caller
 * holds the task's row lock, so exactly one refusal per period gets true).
 */
export async function markCostLimitReached(
  tx: Queryable,
  taskId: string,
  since: Date,
  now: Date,
): Promise<boolean> {
  const rows = await tx.query(
    `UPDATE tasks SET cost_limit_reached_at = $3
      WHERE id = $1 AND (cost_limit_reached_at IS NULL OR cost_limit_reached_at < $2)
     RETURNING id`,
    [taskId, since, now],
  );
  return rows.length > 0;
}
