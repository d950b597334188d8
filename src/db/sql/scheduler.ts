import type { Queryable } from '../db.ts';
import type { TaskRow } from './tasks.ts';

/**
 * Locks up to `limit` active tasks whose slot is due, oldest slot first. SKIP LOCKED: tasks that
 * another scheduler (or an API edit) holds are left to it, so schedulers never wait on each
 * other and never see the same task in the same instant.
 */
export function lockDueTasks(tx: Queryable, now: Date, limit: number): Promise<TaskRow[]> {
  return tx.query<TaskRow>(
    `SELECT * FROM tasks
      WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= $1
      ORDER BY next_run_at, id
      LIMIT $2
      FOR UPDATE SKIP LOCKED`,
    [now, limit],
  );
}

/** Moves a claimed task to its next slot; a task without one becomes `completed` when asked. */
export async function advanceTask(
  tx: Queryable,
  taskId: string,
  nextRunAt: Date | null,
  complete: boolean,
  now: Date,
): Promise<void> {
  await tx.query(
    `UPDATE tasks SET next_run_at = $2,
        status = CASE WHEN $3 THEN 'completed' ELSE status END,
        updated_at = CASE WHEN $3 THEN $4 ELSE updated_at END
      WHERE id = $1`,
    [taskId, nextRunAt, complete, now],
  );
}

/** The nearest slot of any active task (the scheduler sleeps until then). */
export async function nearestDueAt(db: Queryable): Promise<Date | null> {
  const [row] = await db.query<{ at: Date | null }>(
    `SELECT min(next_run_at) AS at FROM tasks WHERE status = 'active' AND next_run_at IS NOT NULL`,
  );
  return row?.at ?? null;
}
