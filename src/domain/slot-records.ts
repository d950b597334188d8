// What the API and the dashboard show of a task's schedule: the record of every slot the
// scheduler passed (written by the scheduler's statement, db/sql/scheduler.ts), the next slots
// with their local times, and a preview of a schedule before any task has it.
import { listSlotRecords, type SlotRecordRow } from '../db/sql/slot-records.ts';
import { findTask } from '../db/sql/tasks.ts';
import { errors } from '../lib/errors.ts';
import { type ScheduleColumns, scheduleSpecOf } from '../schedule/task-spec.ts';
import { previewSlots, type UpcomingSlot as Upcoming, upcomingFrom } from '../schedule/upcoming.ts';
import type { SchedulePreviewBody, SlotRecord, UpcomingSlot } from '../schemas/slot.ts';
import type { Deps } from './deps.ts';
import { pinnedWeekday, scheduleProblems } from './tasks.ts';

/** The newest `limit` slot records of one of the organization's tasks, newest first. */
export async function taskSlotRecords(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  taskId: string,
  limit = 20,
): Promise<SlotRecord[]> {
  const rows = await listSlotRecords(deps.db, organizationId, taskId, limit);
  if (!rows) throw errors.notFound('Task');
  return rows.map(slotRecordView);
}

/** The SlotRecord resource of a row; fields without a value are omitted. */
export function slotRecordView(r: SlotRecordRow): SlotRecord {
  return {
    slotAt: r.slot_at.toISOString(),
    outcome: r.outcome,
    ...(r.run_id && { runId: r.run_id }),
    ...(r.reason && { reason: r.reason }),
    ...(r.slots > 1 && { slots: r.slots }),
  };
}

const view = (slots: Upcoming[]): UpcomingSlot[] =>
  slots.map((s) => ({ at: s.at.toISOString(), localTime: s.localTime, ...(s.note && { note: s.note }) }));

/**
 * The task's next `count` slots, from its nextRunAt on (a slot the scheduler has yet to reach
 * comes first even if its time has passed). A paused or completed task has none: it has no
 * nextRunAt, and resuming computes its next slot afresh from then.
 */
export async function taskUpcomingSlots(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  taskId: string,
  count = 5,
): Promise<UpcomingSlot[]> {
  const task = await findTask(deps.db, organizationId, taskId);
  if (!task) throw errors.notFound('Task');
  if (task.status !== 'active') return [];
  return view(upcomingFrom(scheduleSpecOf(task), task.next_run_at, count));
}

/**
 * The first `count` slots a task created now with these schedule fields would get: the same
 * defaults and the same validation (paths and messages) as a task's.
 */
export function previewSchedule(deps: Pick<Deps, 'clock'>, body: SchedulePreviewBody): UpcomingSlot[] {
  const now = deps.clock.now();
  const fields: ScheduleColumns = {
    schedule: body.schedule ?? 'once',
    schedule_time: body.scheduleTime ?? null,
    schedule_days: body.scheduleDays ?? null,
    cron_expression: body.cronExpression ?? null,
    timezone: body.timezone ?? 'UTC',
  };
  const details = scheduleProblems(fields);
  if (details.length) throw errors.validation(`${details[0]?.path} ${details[0]?.message}`, details);
  fields.schedule_days = pinnedWeekday(fields, now);
  return view(previewSlots(scheduleSpecOf(fields), now, body.count ?? 5));
}
