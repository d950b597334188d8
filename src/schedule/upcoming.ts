// The next slots of a schedule as a person reads them: each instant in UTC, its local date-time
// with the offset in the schedule's timezone, and a note where the DST rule (slots.ts) moved the
// slot (a wall time that does not exist that day) or chose it (a wall time that occurs twice).
// Pure and clock-free.
import { firstSlot, nextSlotWithWall, type ScheduleSpec } from './slots.ts';
import { offsetAt, wallTime } from './timezone.ts';

export interface UpcomingSlot {
  at: Date;
  /** ISO local date-time with its offset, e.g. 2026-03-29T03:30:00+02:00. */
  localTime: string;
  note?: string;
}

const HOUR = 3_600_000;

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** A wall time (see timezone.ts) as YYYY-MM-DDTHH:MM:SS. */
function wallText(wall: number): string {
  const d = new Date(wall);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

const clock = (wall: number) => wallText(wall).slice(11, 16);
const day = (wall: number) => wallText(wall).slice(0, 10);

/** The local date-time of `at` in `timezone`, with its UTC offset (+HH:MM). */
export function localTimeOf(at: Date, timezone: string): string {
  const offsetMinutes = Math.round(offsetAt(timezone, at.getTime()) / 60_000);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  return `${wallText(wallTime(timezone, at.getTime()))}${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

/** What the DST rule did to the slot named by `wall` that runs at `at`, if anything. */
function dstNote(timezone: string, at: Date, wall: number): string | undefined {
  const t = at.getTime();
  const local = wallTime(timezone, t);
  if (local !== wall) {
    return `${clock(wall)} does not exist on ${day(wall)} in ${timezone} (the clocks go forward): runs at ${clock(local)}, the first moment after the gap`;
  }
  // A fall-back overlap: the same wall time comes again once the offset has dropped.
  const drop = offsetAt(timezone, t) - offsetAt(timezone, t + 3 * HOUR);
  if (drop > 0 && wallTime(timezone, t + drop) === wall) {
    return `${clock(wall)} occurs twice on ${day(wall)} in ${timezone} (the clocks go back): runs once, at the first`;
  }
  return undefined;
}

function describe(spec: ScheduleSpec, at: Date, wall: number | null): UpcomingSlot {
  const note = wall === null ? undefined : dstNote(spec.timezone, at, wall);
  return { at, localTime: localTimeOf(at, spec.timezone), ...(note && { note }) };
}

/**
 * Up to `count` slots from `first` (the next slot, itself included) on. `first` null: none.
 * The first slot's note is found by looking for the slot from just before it.
 */
export function upcomingFrom(spec: ScheduleSpec, first: Date | null, count: number): UpcomingSlot[] {
  if (!first || count < 1) return [];
  const out: UpcomingSlot[] = [];
  // A `once` task with a time has the slot a daily schedule at that time would give.
  const named =
    !spec.cronExpression && spec.schedule === 'once' ? { ...spec, schedule: 'daily' as const } : spec;
  const again = nextSlotWithWall(named, new Date(first.getTime() - 1));
  out.push(describe(spec, first, again && again.at.getTime() === first.getTime() ? again.wall : null));
  let cursor = first;
  while (out.length < count) {
    const next = nextSlotWithWall(spec, cursor);
    if (!next) break;
    out.push(describe(spec, next.at, next.wall));
    cursor = next.at;
  }
  return out;
}

/** The first `count` slots a schedule set up at `now` would get (a schedule preview). */
export function previewSlots(spec: ScheduleSpec, now: Date, count: number): UpcomingSlot[] {
  return upcomingFrom(spec, firstSlot(spec, now), count);
}
