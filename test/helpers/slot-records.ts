import assert from 'node:assert/strict';
import type { TickResult } from '../../src/scheduler/claimer.ts';

/** Any client's query, as rows (the Db seam's, or a pg.Client's wrapped). */
export type Rows = <T>(sql: string, params?: unknown[]) => Promise<T[]>;

export interface OutcomeTotals {
  ran: number;
  missed: number;
  skipped_overlap: number;
  skipped_budget: number;
  skipped_run_limit: number;
}

/** What the scheduler's tick results say it decided, per slot outcome. */
export function totalsOfTicks(ticks: readonly TickResult[]): OutcomeTotals {
  const sum = (f: (t: TickResult) => number) => ticks.reduce((n, t) => n + f(t), 0);
  return {
    ran: sum((t) => t.runsCreated),
    missed: sum((t) => t.missed),
    skipped_overlap: sum((t) => t.skippedOverlap),
    skipped_budget: sum((t) => t.skippedBudget),
    skipped_run_limit: sum((t) => t.skippedRunLimit),
  };
}

/** The slots recorded for these tasks (all tasks: null) per outcome; a folded record counts its slots. */
export async function recordedOutcomes(
  rows: Rows,
  taskIds: readonly string[] | null,
): Promise<OutcomeTotals> {
  const found = await rows<{ outcome: keyof OutcomeTotals; n: number }>(
    `SELECT outcome, sum(slots)::int AS n FROM task_slots
      WHERE $1::uuid[] IS NULL OR task_id = ANY($1::uuid[]) GROUP BY outcome`,
    [taskIds],
  );
  const totals: OutcomeTotals = {
    ran: 0,
    missed: 0,
    skipped_overlap: 0,
    skipped_budget: 0,
    skipped_run_limit: 0,
  };
  for (const r of found) totals[r.outcome] = r.n;
  return totals;
}

/**
 * Every scheduled run has exactly one record, `ran`, naming it at its slot, and every `ran`
 * record names a scheduled run of its slot: a slot is never recorded without its decision.
 */
export async function assertRunsMatchRecords(rows: Rows, taskIds: readonly string[] | null): Promise<void> {
  const [mismatch] = await rows<{ unrecorded: number; orphaned: number }>(
    `SELECT
       (SELECT count(*)::int FROM runs r
         WHERE r.trigger = 'schedule' AND ($1::uuid[] IS NULL OR r.task_id = ANY($1::uuid[]))
           AND NOT EXISTS (SELECT 1 FROM task_slots s WHERE s.task_id = r.task_id AND s.slot_at = r.slot_at
                             AND s.outcome = 'ran' AND s.run_id = r.id)) AS unrecorded,
       (SELECT count(*)::int FROM task_slots s
         WHERE s.outcome = 'ran' AND ($1::uuid[] IS NULL OR s.task_id = ANY($1::uuid[]))
           AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id AND r.slot_at = s.slot_at)) AS orphaned`,
    [taskIds],
  );
  assert.deepEqual(mismatch, { unrecorded: 0, orphaned: 0 }, 'one ran record per scheduled run');
}
