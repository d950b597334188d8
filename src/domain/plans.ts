/**
 * The plan table: the one place that says what each plan allows. An organization's effective
 * limits are its plan's, with any operator override (enterprise) on top.
 */
export const PLANS = ['free', 'paid'] as const;
export type Plan = (typeof PLANS)[number];

export interface PlanLimits {
  rateLimitPerMinute: number;
  tasksLimit: number;
  /** Runs per billing period; null = unlimited. */
  runsLimit: number | null;
  usersLimit: number;
  /** Usage included in the plan each period, in cents; costs beyond it are usage charges. */
  usageCreditsCents: number;
}

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

/** Requests per minute allowed to one client address before it has authenticated. */
export const UNAUTHENTICATED_RATE_LIMIT = PLAN_LIMITS.free.rateLimitPerMinute;

export type LimitOverrides = Partial<
  Pick<PlanLimits, 'rateLimitPerMinute' | 'tasksLimit' | 'runsLimit' | 'usersLimit'>
>;

export function effectiveLimits(plan: Plan, overrides: LimitOverrides): PlanLimits {
  const limits = { ...PLAN_LIMITS[plan] };
  if (overrides.rateLimitPerMinute !== undefined) limits.rateLimitPerMinute = overrides.rateLimitPerMinute;
  if (overrides.tasksLimit !== undefined) limits.tasksLimit = overrides.tasksLimit;
  if (overrides.runsLimit !== undefined) limits.runsLimit = overrides.runsLimit;
  if (overrides.usersLimit !== undefined) limits.usersLimit = overrides.usersLimit;
  return limits;
}
