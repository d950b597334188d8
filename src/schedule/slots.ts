// Schedule maths: which instants a task's schedule selects. Pure and clock-free (time is passed in).
//
// ## The DST rule (holds for every kind: hourly, daily, weekly, once-with-time and cron)
//
// A schedule is a set of local wall-clock times in the task's timezone. Each of those wall times
// becomes one instant:
// - A local time that does not exist (spring-forward gap) runs at the first instant after the gap
//   (02:30 in a 02:00→03:00 gap runs at 03:00 local). If that instant is also a slot in its own
//   right (03:00 is scheduled too), it is one slot, not two.
// - A local time that occurs twice (fall-back overlap) runs once, at its first occurrence.
// - Nothing is ever skipped or doubled.
// Formally, wall time w runs at min{ t : local(t) >= w }, which is monotone in w, so the slots after
// an instant are found by walking matching wall times upwards from that instant's local time.
//
// ## Why croner is not asked for instants directly
//
// croner 11 applies Vixie cron's DST split: "fixed-time" jobs (a single value in minute and hour,
// e.g. `30 2 * * *`) follow the rule above, but "interval" jobs (any `*`, step, range or list in
// minute/hour, e.g. `15 * * * *`, `30 2,14 * * *`, `*/30 * * * *`) skip times in a gap and run twice
// in an overlap. So croner is only used to enumerate matching *wall times*: the pattern is evaluated
// with a fixed UTC offset of 0 over wall times encoded as UTC (no DST there), and every wall time is
// resolved to an instant with the Intl-based maths in ./timezone.ts.
//
// ## Cron dialect
//
// Exactly 5 fields (minute hour day-of-month month day-of-week); values, `*`, lists, ranges, steps
// (`*/n`, `a-b/n`), month names JAN-DEC and weekday names SUN-SAT (0 and 7 are Sunday). Croner's
// extensions (seconds, years, `?`, `L`, `W`, `#`, `+`, `@nicknames`) are refused. Day matching follows
// Vixie cron: if the day-of-month or day-of-week field starts with `*`, a day must match both fields;
// otherwise (both restricted) a day matches if EITHER field matches (`0 9 1 * 1` = the 1st OR Mondays).
import { Cron } from 'croner';
import { instantOfWallTime, isKnownTimeZone, wallTime } from './timezone.ts';

export const WEEKDAYS = [
  'monday',
  'tuesday',
  'wednesday',
  'thursday',
  'friday',
  'saturday',
  'sunday',
] as const;
export type Weekday = (typeof WEEKDAYS)[number];

export interface ScheduleSpec {
  schedule: 'once' | 'hourly' | 'daily' | 'weekly';
  /** 'HH:MM', 24-hour. Absent: daily/weekly at 09:00, hourly at minute 0, once as soon as possible. */
  scheduleTime?: string | null;
  /** Weekly only. Absent or empty: the weekday (in the task's timezone) of the reference instant. */
  scheduleDays?: Weekday[] | null;
  /** 5-field cron; when set it overrides schedule, scheduleTime and scheduleDays. */
  cronExpression?: string | null;
  /** IANA timezone name. */
  timezone: string;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const DEFAULT_TIME = { hour: 9, minute: 0 };

const SCHEDULE_TIME_RE = /^([01]\d|2[0-3]):[0-5]\d$/;

export function isValidScheduleTime(s: string): boolean {
  return typeof s === 'string' && SCHEDULE_TIME_RE.test(s);
}

/** Real IANA zone names that Intl accepts ('UTC', 'Etc/GMT+5', 'Europe/Berlin'); not offsets such as '+03:00'. */
export function isValidTimezone(tz: string): boolean {
  return isKnownTimeZone(tz);
}

/** The weekday of `instant` in `timezone`. */
export function weekdayAt(instant: Date, timezone: string): Weekday {
  return weekdayOfWall(wallTime(timezone, checkedTime(instant)));
}

/** The first slot strictly after `after`, or null when there is none (a `once` task never has a second). */
export function nextSlot(spec: ScheduleSpec, after: Date): Date | null {
  return nextSlotWithWall(spec, after)?.at ?? null;
}

/**
 * nextSlot with the wall time (see timezone.ts) that names the slot: in a DST gap it differs
 * from the slot's own local time, which is how a preview says a slot was moved.
 */
export function nextSlotWithWall(spec: ScheduleSpec, after: Date): { at: Date; wall: number } | null {
  const afterMs = checkedTime(after);
  const next = wallIterator(spec, afterMs);
  if (!next) return null;
  // Every wall time <= local(after) resolves to an instant <= after, and resolution is monotone, so
  // the first matching wall time above local(after) that resolves beyond `after` is the answer.
  let wall: number | null = wallTime(spec.timezone, afterMs);
  for (;;) {
    wall = next(wall);
    if (wall === null) return null;
    const instant = instantOfWallTime(spec.timezone, wall);
    if (instant > afterMs) return { at: new Date(instant), wall };
  }
}

/**
 * The slot a task gets when created or when its schedule changes, at time `now`: for `once`
 * without scheduleTime: `now` (as soon as possible); `once` with scheduleTime: the next occurrence
 * of that local time (strictly after now); others: nextSlot(spec, now). For `weekly` without
 * scheduleDays, the weekday of `now` in the task's timezone is used.
 */
export function firstSlot(spec: ScheduleSpec, now: Date): Date | null {
  const nowMs = checkedTime(now);
  if (!spec.cronExpression && spec.schedule === 'once') {
    if (!spec.scheduleTime) return new Date(nowMs);
    return nextSlot({ ...spec, schedule: 'daily' }, now);
  }
  return nextSlot(spec, now);
}

/** The next n slots after `after` (preview). Empty for `once`, which has no slot after its first. */
export function upcomingSlots(spec: ScheduleSpec, after: Date, n: number): Date[] {
  const out: Date[] = [];
  let cursor: Date | null = after;
  while (out.length < n) {
    cursor = nextSlot(spec, cursor);
    if (!cursor) break;
    out.push(cursor);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Wall-time enumeration

/** Returns the smallest matching (minute-aligned) wall time strictly greater than `wall`, or null. */
type WallIterator = (wall: number) => number | null;

function wallIterator(spec: ScheduleSpec, referenceMs: number): WallIterator | null {
  if (spec.cronExpression) {
    const cron = compiledCron(spec.cronExpression);
    return (wall) => cron.nextRun(new Date(wall))?.getTime() ?? null;
  }
  switch (spec.schedule) {
    case 'once':
      return null;
    case 'hourly': {
      const offset = parseTime(spec.scheduleTime, { hour: 0, minute: 0 }).minute * MINUTE;
      return (wall) => ceilAbove(wall, HOUR, offset);
    }
    case 'daily': {
      const t = parseTime(spec.scheduleTime, DEFAULT_TIME);
      const offset = t.hour * HOUR + t.minute * MINUTE;
      return (wall) => ceilAbove(wall, DAY, offset);
    }
    case 'weekly': {
      const t = parseTime(spec.scheduleTime, DEFAULT_TIME);
      const offset = t.hour * HOUR + t.minute * MINUTE;
      const days = new Set<Weekday>(
        spec.scheduleDays && spec.scheduleDays.length > 0
          ? spec.scheduleDays
          : [weekdayOfWall(wallTime(spec.timezone, referenceMs))],
      );
      for (const d of days) {
        if (!(WEEKDAYS as readonly string[]).includes(d))
          throw new RangeError(`invalid weekday: ${String(d)}`);
      }
      return (wall) => {
        let c = ceilAbove(wall, DAY, offset);
        while (!days.has(weekdayOfWall(c))) c += DAY;
        return c;
      };
    }
    default:
      throw new RangeError(`unknown schedule: ${String(spec.schedule)}`);
  }
}

/** The smallest value k*period + offset strictly greater than `x`. */
function ceilAbove(x: number, period: number, offset: number): number {
  let c = Math.floor((x - offset) / period) * period + offset;
  while (c <= x) c += period;
  return c;
}

function weekdayOfWall(wall: number): Weekday {
  // getUTCDay: 0 = Sunday; WEEKDAYS starts on Monday.
  return WEEKDAYS[(new Date(wall).getUTCDay() + 6) % 7] as Weekday;
}

function parseTime(s: string | null | undefined, fallback: { hour: number; minute: number }) {
  if (s === null || s === undefined || s === '') return fallback;
  if (!isValidScheduleTime(s)) throw new RangeError(`invalid scheduleTime: ${JSON.stringify(s)}`);
  return { hour: Number(s.slice(0, 2)), minute: Number(s.slice(3, 5)) };
}

function checkedTime(d: Date): number {
  const t = d instanceof Date ? d.getTime() : Number.NaN;
  if (!Number.isFinite(t)) throw new RangeError('invalid date');
  return t;
}

// ---------------------------------------------------------------------------------------------
// Cron

interface CronField {
  name: string;
  min: number;
  max: number;
  names?: readonly string[];
  namesStart?: number;
  /** Largest step (croner's limit: the number of distinct values; 7 for day-of-week). */
  maxStep?: number;
}

const CRON_FIELDS: readonly CronField[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  {
    name: 'month',
    min: 1,
    max: 12,
    names: ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'],
    namesStart: 1,
  },
  {
    name: 'day-of-week',
    min: 0,
    max: 7,
    names: ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'],
    namesStart: 0,
    maxStep: 7,
  },
];

const CRON_TOKEN_RE = /^(?:(\*)|([0-9A-Za-z]+)(?:-([0-9A-Za-z]+))?)(?:\/([0-9]+))?$/;

function cronValue(text: string, field: CronField): number | string {
  let v: number;
  if (/^\d+$/.test(text)) v = Number(text);
  else {
    const i = field.names?.indexOf(text.toLowerCase()) ?? -1;
    if (i < 0) {
      return field.names
        ? `'${text}' is not a number or a name (${field.names.join(', ').toUpperCase()})`
        : `'${text}' is not a number`;
    }
    v = i + (field.namesStart ?? 0);
  }
  if (v < field.min || v > field.max) return `${v} is out of range ${field.min}-${field.max}`;
  return v;
}

function checkCronField(text: string, field: CronField): string | null {
  for (const token of text.split(',')) {
    const m = CRON_TOKEN_RE.exec(token);
    if (!m) return `'${token}' is not a value, range, step or *`;
    const [, star, from, to, step] = m;
    if (step !== undefined) {
      const n = Number(step);
      const maxStep = field.maxStep ?? field.max - field.min + 1;
      if (n < 1 || n > maxStep) return `step ${step} is out of range 1-${maxStep}`;
      if (!star && to === undefined) return `a step needs * or a range before it ('${token}')`;
    }
    if (star) continue;
    const a = cronValue(from ?? '', field);
    if (typeof a === 'string') return a;
    if (to !== undefined) {
      const b = cronValue(to, field);
      if (typeof b === 'string') return b;
      if (a > b) return `range ${token} runs backwards`;
    }
  }
  return null;
}

function cronProblem(fields: string[]): string | null {
  if (fields.length !== 5) {
    const extra = fields.length > 5 ? '; seconds and year fields are not supported' : '';
    return `cron expression must have exactly 5 fields (minute hour day-of-month month day-of-week), got ${fields.length}${extra}`;
  }
  for (const [i, field] of CRON_FIELDS.entries()) {
    const text = fields[i] ?? '';
    const problem = checkCronField(text, field);
    if (problem) return `invalid ${field.name} field '${text}': ${problem}`;
  }
  return null;
}

/** Validates a 5-field cron expression (see the dialect at the top of this file). */
export function checkCronExpression(expr: string): { ok: true } | { ok: false; message: string } {
  if (typeof expr !== 'string' || expr.trim() === '') {
    return { ok: false, message: 'cron expression is empty' };
  }
  let cron: Cron;
  try {
    cron = compiledCron(expr);
  } catch (e) {
    return { ok: false, message: (e as Error).message };
  }
  // Every 5-field pattern that can match does so within 28 years (leap years, weekday cycles).
  if (!cron.nextRun(new Date(Date.UTC(2000, 0, 1)))) {
    return { ok: false, message: `cron expression '${expr.trim()}' never matches a date` };
  }
  return { ok: true };
}

const cronCache = new Map<string, Cron>();

/** A croner job evaluated on wall times encoded as UTC, with Vixie day-of-month/day-of-week logic. */
function compiledCron(expr: string): Cron {
  const key = expr.trim();
  let cron = cronCache.get(key);
  if (cron) return cron;
  const fields = key.split(/\s+/);
  const problem = cronProblem(fields);
  if (problem) throw new RangeError(problem);
  const dom = fields[2] ?? '*';
  const dow = fields[4] ?? '*';
  // croner ORs the two day fields unless one is exactly '*'; Vixie ANDs them whenever either starts
  // with '*' (e.g. '*/2'), so ask croner for AND in exactly those cases.
  const vixieAnd = (dom.startsWith('*') || dow.startsWith('*')) && dom !== '*' && dow !== '*';
  // Names become numbers before croner sees them: croner reads a name range whose ends are
  // equal ('SUN-SUN') as the whole week, while '0-0' is one day.
  const numeric = fields.map((text, i) => {
    const field = CRON_FIELDS[i];
    if (!field?.names) return text;
    return text.replace(/[A-Za-z]+/g, (name) => String(cronValue(name, field)));
  });
  try {
    cron = new Cron(numeric.join(' '), { utcOffset: 0, mode: '5-part', domAndDow: vixieAnd });
  } catch (e) {
    throw new RangeError(`invalid cron expression: ${(e as Error).message}`, { cause: e });
  }
  if (cronCache.size >= 1000) cronCache.clear();
  cronCache.set(key, cron);
  return cron;
}
