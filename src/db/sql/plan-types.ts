/**
 * The shapes of the plan columns as the database stores them: an organization's plan and its
 * operator overrides (organizations.plan, organizations.limit_overrides). They live here, below
 * the domain, because the SQL layer reads and writes them; what each plan allows is the domain's
 * (domain/plans.ts).
 */
import type { PLANS } from '../../schemas/bounds.ts';

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

/** The limits an operator may set for one organization over its plan's (enterprise). */
export type LimitOverrides = Partial<
  Pick<PlanLimits, 'rateLimitPerMinute' | 'tasksLimit' | 'runsLimit' | 'usersLimit'>
>;
