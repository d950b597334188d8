// The records of the slots a claim misses (the runs and skips are recorded by the statement that
// decides them, db/sql/scheduler.ts). Each missed slot gets its own record, the newest
// MISSED_RECORDS_PER_CLAIM of a claim; older ones of the same claim are folded into one record
// that says how many it stands for, so one claim after any outage writes a bounded number of rows.
import type { MissedSlotRecord } from '../db/sql/scheduler.ts';
import { type DueSlotPlan, MISSED_COUNT_CAP } from './due-slot.ts';

const minutes = (ms: number) => `${Math.round(ms / 60_000)} min`;

/** The most slot records a task holds. */
export const SLOT_RECORDS_PER_TASK = 500;
/**
 * What a task's records are pruned to once a claim would take them past SLOT_RECORDS_PER_TASK:
 * the slack between the two makes pruning (which walks the task's newest records) happen once
 * in about a hundred claims rather than at every one.
 */
export const SLOT_RECORDS_PRUNED_TO = 400;

/**
 * How a task's records are kept after a claim that writes `fresh` of them, given `stored` (the
 * task's `slot_records`, never below its real count): `count`, the new upper bound, and
 * `keep`, when pruning, how many of its existing records stay (the newest).
 */
export function recordKeeping(stored: number, fresh: number): { count: number; keep?: number } {
  if (stored + fresh <= SLOT_RECORDS_PER_TASK) return { count: stored + fresh };
  return { count: SLOT_RECORDS_PRUNED_TO, keep: Math.max(0, SLOT_RECORDS_PRUNED_TO - fresh) };
}

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
