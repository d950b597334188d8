import type { ErrorDetail } from '../../lib/errors.ts';
import {
  checkCronExpression,
  firstSlot,
  isValidScheduleTime,
  isValidTimezone,
  type ScheduleSpec,
  upcomingSlots,
  WEEKDAYS,
  type Weekday,
} from '../../schedule/slots.ts';
import { SCHEDULES, type Task } from '../../schemas/task.ts';
import { type Html, html } from '../html.ts';
import { fieldLabel, when } from '../page-kit.ts';
import { RUN_CHECK_LABELS } from './task-run-checks.ts';
export const DAY_ABBR: Record<Weekday, string> = {
  monday: 'Mon',
  tuesday: 'Tue',
  wednesday: 'Wed',
  thursday: 'Thu',
  friday: 'Fri',
  saturday: 'Sat',
  sunday: 'Sun',
};

export type ScheduleOf = Pick<
  Task,
  'schedule' | 'scheduleTime' | 'scheduleDays' | 'cronExpression' | 'timezone'
>;

/** "Every day at 09:00 (Europe/Paris)", "Weekly on Mon, Wed at 08:30 (UTC)", "Hourly at :15", ... */
export function scheduleInWords(t: ScheduleOf): Html {
  const tz = t.timezone ?? 'UTC';
  if (t.cronExpression) return html`Cron <code>${t.cronExpression}</code> (${tz})`;
  const time = t.scheduleTime ?? '09:00';
  switch (t.schedule) {
    case 'once':
      return t.scheduleTime ? html`Once at ${t.scheduleTime} (${tz})` : html`Once`;
    case 'hourly':
      return html`Hourly at :${(t.scheduleTime ?? '00:00').slice(3, 5)}`;
    case 'daily':
      return html`Every day at ${time} (${tz})`;
    case 'weekly': {
      const days = WEEKDAYS.filter((d) => t.scheduleDays?.includes(d)).map((d) => DAY_ABBR[d]);
      return html`Weekly on ${days.length ? days.join(', ') : 'the day it was saved'} at ${time} (${tz})`;
    }
  }
}

export const MODES = [...SCHEDULES, 'cron'] as const;
export type Mode = (typeof MODES)[number];
export const MODE_LABELS: Record<Mode, string> = {
  once: 'Once',
  hourly: 'Hourly',
  daily: 'Daily',
  weekly: 'Weekly',
  cron: 'Cron expression',
};

export interface ScheduleInput {
  mode: string;
  scheduleTime: string;
  scheduleDays: string[];
  timezone: string;
  cronExpression: string;
}

/** What is wrong with a schedule as entered, by the domain's own rules (slots.ts). */
export function scheduleProblems(s: ScheduleInput): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  if (!(MODES as readonly string[]).includes(s.mode)) {
    details.push({ path: '/body/schedule', message: `must be one of: ${MODES.join(', ')}` });
  }
  if (s.timezone && !isValidTimezone(s.timezone)) {
    details.push({ path: '/body/timezone', message: 'is not an IANA timezone name' });
  }
  if (s.mode === 'cron') {
    const cron = checkCronExpression(s.cronExpression);
    if (!cron.ok) details.push({ path: '/body/cronExpression', message: cron.message });
  } else {
    if (s.scheduleTime && !isValidScheduleTime(s.scheduleTime)) {
      details.push({ path: '/body/scheduleTime', message: 'must be a time HH:MM (24-hour)' });
    }
    if (s.scheduleDays.some((d) => !(WEEKDAYS as readonly string[]).includes(d))) {
      details.push({ path: '/body/scheduleDays', message: `must be among: ${WEEKDAYS.join(', ')}` });
    }
  }
  return details;
}

export function specOf(s: ScheduleInput): ScheduleSpec {
  const timezone = s.timezone || 'UTC';
  if (s.mode === 'cron') return { schedule: 'once', cronExpression: s.cronExpression, timezone };
  return {
    schedule: s.mode as ScheduleSpec['schedule'],
    scheduleTime: s.scheduleTime || null,
    scheduleDays: s.mode === 'weekly' ? (s.scheduleDays as Weekday[]) : null,
    timezone,
  };
}

export function slotList(slots: Date[], timezone: string, note?: string): Html {
  if (slots.length === 0) return html`<p class="muted">No further run.</p>`;
  return html`<p class="muted">${note ?? `Next ${slots.length === 1 ? 'run' : `${slots.length} runs`}`} (${timezone}):</p>
<ol>${slots.map((s) => html`<li>${when(s, timezone)}</li>`)}</ol>`;
}

/** The next five slots of a schedule as entered, counted from now (as saving it would). */
export function schedulePreview(s: ScheduleInput, now: Date): Html {
  const problems = scheduleProblems(s);
  if (problems.length > 0) {
    return html`<p class="muted">No preview: ${problems.map((p, i) => html`${i ? '; ' : ''}${fieldLabel(p.path, TASK_LABELS)}: ${p.message}`)}.</p>`;
  }
  const spec = specOf(s);
  try {
    const first = firstSlot(spec, now);
    if (!first) return slotList([], spec.timezone);
    if (!spec.cronExpression && spec.schedule === 'once') {
      return slotList(
        [first],
        spec.timezone,
        spec.scheduleTime ? 'Runs once' : 'Runs once, as soon as it is saved',
      );
    }
    return slotList([first, ...upcomingSlots(spec, first, 4)], spec.timezone);
  } catch (err) {
    if (err instanceof RangeError) return html`<p class="muted">No preview: ${err.message}.</p>`;
    throw err;
  }
}

/** The next five slots of a saved task: from its nextRunAt when active, else as if resumed now. */
export function savedPreview(task: Task, now: Date): Html {
  const tz = task.timezone ?? 'UTC';
  if (task.status === 'active') {
    if (!task.nextRunAt) return html`<p class="muted">No further run is scheduled.</p>`;
    const next = new Date(task.nextRunAt);
    const spec: ScheduleSpec = {
      schedule: task.schedule,
      scheduleTime: task.scheduleTime ?? null,
      scheduleDays: task.scheduleDays ?? null,
      cronExpression: task.cronExpression ?? null,
      timezone: tz,
    };
    const rest = !task.cronExpression && task.schedule === 'once' ? [] : upcomingSlots(spec, next, 4);
    return slotList([next, ...rest], tz);
  }
  return html`<p class="muted">The task is ${task.status}; if it were resumed now:</p>${schedulePreview(scheduleOfTask(task), now)}`;
}

export function scheduleOfTask(task: Task): ScheduleInput {
  return {
    mode: task.cronExpression ? 'cron' : task.schedule,
    scheduleTime: task.scheduleTime ?? '',
    scheduleDays: task.scheduleDays ?? [],
    timezone: task.timezone ?? 'UTC',
    cronExpression: task.cronExpression ?? '',
  };
}

/** The form's field labels by request path, for problem lists. */
export const TASK_LABELS: Record<string, string> = {
  ...RUN_CHECK_LABELS,
  name: 'Name',
  monthlyCostLimitCents: 'Monthly cost limit',
  prompt: 'Prompt',
  model: 'Model',
  schedule: 'Schedule',
  status: 'Status',
  scheduleTime: 'Time',
  scheduleDays: 'Days',
  timezone: 'Timezone',
  cronExpression: 'Cron expression',
  skillIds: 'Skill',
  sourceIds: 'Source',
  destinations: 'Destination',
  type: 'type',
  value: 'value',
  label: 'label',
};
