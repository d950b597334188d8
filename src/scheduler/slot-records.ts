// The records of the slots a claim misses (the runs and skips are recorded by the statement that
// decides them, db/sql/scheduler.ts). Each missed slot gets its own record, the newest
// MISSED_RECORDS_PER_CLAIM of a claim; older ones of the same claim are folded into one record
// that says how many it stands for, so one claim after any outage writes a bounded number of rows.
import type { MissedSlotRecord } from '../db/sql/scheduler.ts';
import { type DueSlotPlan, MISSED_COUNT_CAP } from './due-slot.ts';

const minutes = (ms: number) => `${Math.round(ms / 60_000)} min`;

/** The missed-slot records of one task's plan, oldest first. */
export function missedSlotRecords(taskId: string, plan: DueSlotPlan, windowMs: number): MissedSlotRecord[] {
  const records: MissedSlotRecord[] = [];
  const folded = plan.missed - plan.missedSlots.length;
  if (plan.firstMissed && folded > 0) {
    records.push({
      taskId,
      slotAt: plan.firstMissed,
      slots: folded,
      reason: `${folded} slots from this one on were missed (older than the catch-up window of ${minutes(windowMs)}, or passed with a later slot)${
        plan.missedCapped
          ? `; counting stops at ${MISSED_COUNT_CAP} slots per claim, so more passed uncounted until the window's start`
          : ''
      }`,
    });
  }
  for (const { at, why } of plan.missedSlots) {
    records.push({
      taskId,
      slotAt: at,
      slots: 1,
      reason:
        why === 'window'
          ? `older than the catch-up window (${minutes(windowMs)}) when the scheduler reached it`
          : 'a later slot had passed too: only the most recent passed slot runs',
    });
  }
  return records;
}
