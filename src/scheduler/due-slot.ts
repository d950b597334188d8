// What the scheduler does with a task that is due: pure, clock-free, so every policy is tested
// without a database or a wait.
//
// The catch-up policy (the design brief): slots that passed while nothing could run them (the
// service was down, the scheduler was behind) get at most ONE late run, for the most recent of
// them, and only when that slot is inside the catch-up window (default one hour) before now.
// Every other passed slot is "missed": counted and logged by the caller, never run.
import { nextSlot, type ScheduleSpec } from '../schedule/slots.ts';

export interface DueSlotPlan {
  /** The slot to create a run for now; null when no passed slot is inside the window. */
  runSlot: Date | null;
  /** Passed slots that get no run (older than the window, or superseded by a later one). */
  missed: number;
  /** The task's next slot after this plan (null when the schedule has no further slot). */
  nextRunAt: Date | null;
  /**
   * The newest missed slots, oldest first, at most MISSED_RECORDS_PER_CLAIM of them, each with
   * why it was missed (`window`: older than the catch-up window; `superseded`: a later slot had
   * passed too). Empty when nothing was missed.
   */
  missedSlots: MissedSlot[];
  /** The first missed slot, when more were missed than missedSlots holds (they are folded). */
  firstMissed: Date | null;
  /** The count stopped at MISSED_COUNT_CAP: more slots than `missed` were passed. */
  missedCapped: boolean;
}

export interface MissedSlot {
  at: Date;
  why: 'window' | 'superseded';
}

/**
 * Missed slots recorded one by one per claim: the newest this many; older ones of the same
 * claim are folded into one record (the slot record table stays bounded after any outage).
 */
export const MISSED_RECORDS_PER_CLAIM = 100;

/**
 * Counting missed slots one by one is bounded: after a long outage of a minutely cron there may
 * be millions. Past this many, the count stops and the walk jumps to the window's start.
 */
export const MISSED_COUNT_CAP = 10_000;

/**
 * Plans a due task: `dueAt` is its stored nextRunAt (<= now), `now` the scheduler's time.
 * Invariants: runSlot, when set, is a slot of the schedule in [now - window, now]; nextRunAt,
 * when set, is after now; no slot in between is returned twice across successive plans.
 */
export function planDueSlot(spec: ScheduleSpec, dueAt: Date, now: Date, windowMs: number): DueSlotPlan {
  const windowStart = now.getTime() - windowMs;
  let missed = 0;
  let missedCapped = false;
  let firstMissed: Date | null = null;
  const missedSlots: MissedSlot[] = [];
  const miss = (at: Date, why: MissedSlot['why']) => {
    missed++;
    firstMissed ??= at;
    missedSlots.push({ at, why });
    if (missedSlots.length > MISSED_RECORDS_PER_CLAIM) missedSlots.shift();
  };
  const done = (runSlot: Date | null, nextRunAt: Date | null): DueSlotPlan => ({
    runSlot,
    missed,
    nextRunAt,
    missedSlots,
    firstMissed: missed > missedSlots.length ? firstMissed : null,
    missedCapped,
  });
  let candidate: Date | null = dueAt;

  // Slots before the window are missed.
  while (candidate && candidate.getTime() < windowStart) {
    if (missed >= MISSED_COUNT_CAP) {
      // The first slot at or after the window's start.
      missedCapped = true;
      candidate = nextSlot(spec, new Date(windowStart - 1));
      break;
    }
    miss(candidate, 'window');
    candidate = nextSlot(spec, candidate);
  }
  if (!candidate || candidate.getTime() > now.getTime()) return done(null, candidate);

  // Inside the window: only the most recent passed slot runs; earlier ones are missed.
  let latest = candidate;
  for (;;) {
    const following = nextSlot(spec, latest);
    if (!following || following.getTime() > now.getTime()) return done(latest, following);
    miss(latest, 'superseded');
    latest = following;
  }
}
