import type { ScheduleSpec, Weekday } from './slots.ts';

/** The schedule columns of a task row. */
export interface ScheduleColumns {
  schedule: ScheduleSpec['schedule'];
  schedule_time: string | null;
  schedule_days: string[] | null;
  cron_expression: string | null;
  timezone: string;
}

/** The schedule of a stored task, as the slot maths takes it. */
export function scheduleSpecOf(row: ScheduleColumns): ScheduleSpec {
  return {
    schedule: row.schedule,
    scheduleTime: row.schedule_time,
    scheduleDays: row.schedule_days as Weekday[] | null,
    cronExpression: row.cron_expression,
    timezone: row.timezone,
  };
}
