/**
 * Intl-based time-zone maths, pure and clock-free.
 *
 * A "wall time" is a local date and time in some zone, represented as the number of milliseconds
 * since the epoch of the same calendar fields read as UTC (so `new Date(wall).getUTCHours()` is the
 * local hour). An "instant" is an ordinary epoch-milliseconds value.
 */

import { setBounded } from '../lib/bounded-map.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      era: 'short',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/**
 * The default zone, answered without Intl: its offset is zero at every instant, and the first
 * Intl.DateTimeFormat of a process loads ICU's zone data (about 15 ms and 9 MB of memory), which
 * a process whose tasks all keep the default never needs. test/timezone.test.ts holds the two
 * ways to the same answers.
 */
const UTC = 'UTC';

/** Whether Intl knows `timeZone` as a named zone (offset strings such as '+03:00' are refused). */
export function isKnownTimeZone(timeZone: string): boolean {
  if (timeZone === UTC) return true;
  if (typeof timeZone !== 'string' || !/^[A-Za-z]/.test(timeZone)) return false;
  try {
    formatterFor(timeZone);
    return true;
  } catch {
    return false;
  }
}

/**
 * Offsets by hour, per zone: `formatToParts` costs microseconds, and a create or a scheduling
 * pass asks for the wall time of instants that mostly fall in a few hours (now, and the next
 * slots). An hour whose first and last second have the same offset is taken to have it
 * throughout: no zone changes its offset and changes it back within one hour. An hour with a
 * transition in it is remembered as such (NaN) and always computed exactly.
 */
const HOURLY_OFFSETS_PER_ZONE = 4096;
const hourlyOffsets = new Map<string, Map<number, number>>();
/** Instants this far inside the Date range, so that probing the whole hour cannot overflow it. */
const MEMO_RANGE = 8.64e15 - 2 * HOUR;

/** The local wall time of `instant` in `timeZone` (milliseconds are carried over unchanged). */
export function wallTime(timeZone: string, instant: number): number {
  if (timeZone === UTC) return instant;
  if (!(Math.abs(instant) < MEMO_RANGE)) return wallTimeUncached(timeZone, instant);
  const hour = Math.floor(instant / HOUR);
  let offsets = hourlyOffsets.get(timeZone);
  let offset = offsets?.get(hour);
  if (offset === undefined) {
    const start = hour * HOUR;
    const end = start + HOUR - 1000;
    const atStart = wallTimeUncached(timeZone, start) - start;
    offset = wallTimeUncached(timeZone, end) - end === atStart ? atStart : Number.NaN;
    if (!offsets) {
      offsets = new Map();
      hourlyOffsets.set(timeZone, offsets);
    }
    setBounded(offsets, hour, offset, HOURLY_OFFSETS_PER_ZONE);
  }
  return Number.isNaN(offset) ? wallTimeUncached(timeZone, instant) : instant + offset;
}

/** wallTime straight from Intl, with no cache. */
export function wallTimeUncached(timeZone: string, instant: number): number {
  let year = 0;
  let month = 1;
  let day = 1;
  let hour = 0;
  let minute = 0;
  let second = 0;
  let bc = false;
  for (const part of formatterFor(timeZone).formatToParts(instant)) {
    switch (part.type) {
      case 'year':
        year = Number(part.value);
        break;
      case 'month':
        month = Number(part.value);
        break;
      case 'day':
        day = Number(part.value);
        break;
      case 'hour':
        hour = Number(part.value) % 24;
        break;
      case 'minute':
        minute = Number(part.value);
        break;
      case 'second':
        second = Number(part.value);
        break;
      case 'era':
        bc = part.value === 'BC' || part.value === 'B';
        break;
    }
  }
  const d = new Date(0);
  d.setUTCFullYear(bc ? 1 - year : year, month - 1, day);
  d.setUTCHours(hour, minute, second, ((instant % 1000) + 1000) % 1000);
  return d.getTime();
}

/** UTC offset of `timeZone` at `instant`, in milliseconds (local minus UTC). */
export function offsetAt(timeZone: string, instant: number): number {
  return wallTime(timeZone, instant) - instant;
}

/**
 * The earliest instant whose local wall time in `timeZone` is at or after `wall`.
 *
 * - A wall time that exists once maps to that instant.
 * - A wall time that exists twice (fall-back overlap) maps to its first occurrence.
 * - A wall time that does not exist (spring-forward gap) maps to the first instant after the gap,
 *   i.e. the transition instant itself.
 *
 * The map is monotone non-decreasing in `wall`.
 */
export function instantOfWallTime(timeZone: string, wall: number): number {
  // Offsets well before and well after the instant in question (offsets lie within ±14h).
  const offBefore = offsetAt(timeZone, wall - DAY);
  const offAfter = offsetAt(timeZone, wall + DAY);
  const candidates = offBefore === offAfter ? [wall - offBefore] : [wall - offBefore, wall - offAfter];
  candidates.sort((a, b) => a - b);
  for (const c of candidates) {
    if (wallTime(timeZone, c) === wall) return c;
  }
  if (offAfter > offBefore) {
    // Spring-forward gap: local(lo) < wall <= local(hi); the transition lies in [lo, hi].
    const lo = wall - offAfter;
    const hi = wall - offBefore;
    if (wallTime(timeZone, lo) < wall && wallTime(timeZone, hi) >= wall) {
      return firstAtOrAfter(timeZone, wall, lo, hi);
    }
  }
  return slowInstantOfWallTime(timeZone, wall);
}

/** Binary search for the first instant in (lo, hi] whose wall time is >= wall, given local(lo) < wall <= local(hi). */
function firstAtOrAfter(timeZone: string, wall: number, lo: number, hi: number): number {
  let a = lo;
  let b = hi;
  while (b - a > 1) {
    const mid = a + Math.floor((b - a) / 2);
    if (wallTime(timeZone, mid) >= wall) b = mid;
    else a = mid;
  }
  return b;
}

/** Fallback for pathological histories (several transitions within two days): scan, then bisect. */
function slowInstantOfWallTime(timeZone: string, wall: number): number {
  const step = 10 * MINUTE;
  let prev = wall - 15 * HOUR; // local(prev) <= wall - 1h, since offsets are at most +14h
  for (let t = prev + step; t <= wall + 15 * HOUR; t += step) {
    if (wallTime(timeZone, t) >= wall) return firstAtOrAfter(timeZone, wall, prev, t);
    prev = t;
  }
  throw new RangeError(`cannot resolve local time ${new Date(wall).toISOString()} in ${timeZone}`);
}
