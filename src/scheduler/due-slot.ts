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
}

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
  let candidate: Date | null = dueAt;

  // Slots before the window are missed.
  while (candidate && candidate.getTime() < windowStart) {
    if (missed >= MISSED_COUNT_CAP) {
      // The first slot at or after the window's start.
      candidate = nextSlot(spec, new Date(windowStart - 1));
      break;
    }
    missed++;
    candidate = nextSlot(spec, candidate);
  }
  if (!candidate || candidate.getTime() > now.getTime()) {
    return { runSlot: null, missed, nextRunAt: candidate };
  }

  // Inside the window: only the most recent passed slot runs; earlier ones are missed.
  let latest = candidate;
  for (;;) {
    const following = nextSlot(spec, latest);
    if (!following || following.getTime() > now.getTime()) {
      return { runSlot: latest, missed, nextRunAt: following };
    }
    missed++;
    latest = following;
  }
}
