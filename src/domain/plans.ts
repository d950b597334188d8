/**
 * The plan table: the one place that says what each plan allows. An organization's effective
 * limits are its plan's, with any operator override (enterprise) on top.
 */
import type { LimitOverrides, Plan, PlanLimits } from '../db/sql/plan-types.ts';

export type { LimitOverrides, Plan, PlanLimits } from '../db/sql/plan-types.ts';
export { PLANS } from '../schemas/bounds.ts';

export const PLAN_LIMITS: Record<Plan, PlanLimits> = {
  free: { rateLimitPerMinute: 60, tasksLimit: 5, runsLimit: 200, usersLimit: 1, usageCreditsCents: 100 },
  paid: {
    rateLimitPerMinute: 300,
    tasksLimit: 100,
    runsLimit: null,
    usersLimit: 10,
    usageCreditsCents: 2000,
  },
};

/**
 * Each plan's tasks limit, for the SQL that applies it (db/sql/task-create.ts), where an
 * organization's override wins as in `effectiveLimits`: that SQL counts active tasks under the
 * organization's row lock, so the limit holds however many creates and resumptions race.
 */
export const PLAN_TASKS_LIMITS: Readonly<Record<Plan, number>> = {
  free: PLAN_LIMITS.free.tasksLimit,
  paid: PLAN_LIMITS.paid.tasksLimit,
};

/** Requests per minute allowed to one client address before it has authenticated. */
export const UNAUTHENTICATED_RATE_LIMIT = PLAN_LIMITS.free.rateLimitPerMinute;

export function effectiveLimits(plan: Plan, overrides: LimitOverrides): PlanLimits {
  const limits = { ...PLAN_LIMITS[plan] };
  if (overrides.rateLimitPerMinute !== undefined) limits.rateLimitPerMinute = overrides.rateLimitPerMinute;
  if (overrides.tasksLimit !== undefined) limits.tasksLimit = overrides.tasksLimit;
  if (overrides.runsLimit !== undefined) limits.runsLimit = overrides.runsLimit;
  if (overrides.usersLimit !== undefined) limits.usersLimit = overrides.usersLimit;
  return limits;
}
