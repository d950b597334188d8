import type { Queryable } from '../db.ts';

export interface SlotRecordRow {
  slot_at: Date;
  outcome: 'ran' | 'skipped_overlap' | 'missed' | 'skipped_budget' | 'skipped_run_limit';
  run_id: string | null;
  slots: number;
  reason: string | null;
}

/**
 * The newest `limit` slot records of one of the organization's tasks, newest first; undefined
 * when the organization has no such task.
 */
export async function listSlotRecords(
  db: Queryable,
  organizationId: string,
  taskId: string,
  limit: number,
): Promise<SlotRecordRow[] | undefined> {
  const rows = await db.query<{ found: boolean } & Partial<SlotRecordRow>>(
    `SELECT true AS found, s.slot_at, s.outcome, s.run_id, s.slots, s.reason
       FROM tasks t LEFT JOIN LATERAL (
         SELECT * FROM task_slots x WHERE x.task_id = t.id ORDER BY x.slot_at DESC LIMIT $3
       ) s ON true
      WHERE t.organization_id = $1 AND t.id = $2
      ORDER BY s.slot_at DESC`,
    [organizationId, taskId, limit],
  );
  if (!rows.length) return undefined;
  return rows.flatMap((r) => (r.slot_at && r.outcome ? [r as SlotRecordRow] : []));
}
