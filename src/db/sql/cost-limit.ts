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

/** What run now checks of a task before creating a run of it. */
export interface TaskRunState extends TaskCostRow {
  /** A run of the task is pending or running. */
  in_flight: boolean;
}

/**
 * Run now's look at a task whose row the caller holds locked, in one statement: whether a run
 * of it is in flight, and its cost limit with its organization's anchor; undefined when the task
 * is not the organization's. Read after the lock is held (a statement of its own), so a run
 * created by a run now that held the lock before is seen.
 */
export async function taskRunState(
  db: Queryable,
  organizationId: string,
  taskId: string,
): Promise<TaskRunState | undefined> {
  const [row] = await db.query<TaskRunState>(
    `SELECT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id AND r.status IN ('pending', 'running')) AS in_flight,
            t.monthly_cost_limit_cents, o.billing_period_start
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
