/**
 * The longest a scheduler sleeps between looks at the tasks table. Wake-ups come from the
 * nearest slot's timer and from NOTIFY svc_tasks; this bound limits the damage of a
 * notification that never arrives, and lets writers skip notifications for far slots.
 */
export const MAX_SLEEP_MS = 60_000;

/** Allowance for clocks of API and scheduler processes that disagree. */
const CLOCK_SKEW_MS = 60_000;

/**
 * Whether a task's new slot must wake the schedulers. One further away than a scheduler can
 * sleep is found by its next look anyway. Skipping the notification matters: a committing
 * transaction that notifies takes a database-wide lock held through its WAL flush, so creates
 * that all notified would commit one at a time, across organizations.
 */
export function slotNeedsWake(nextRunAt: Date | null, now: Date): boolean {
  return nextRunAt !== null && nextRunAt.getTime() < now.getTime() + MAX_SLEEP_MS + CLOCK_SKEW_MS;
}
