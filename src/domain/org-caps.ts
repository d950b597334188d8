// The service's hard caps on what one organization may hold, whatever its plan: they bound
// what its lists return and what it stores (config.orgCaps, docs/api.md "Limits").
import type { Config } from '../config.ts';
import type { Queryable } from '../db/db.ts';
import { unrevokedApiKeyCount } from '../db/sql/api-keys.ts';
import { skillTotals } from '../db/sql/skills.ts';
import { sourceCount } from '../db/sql/sources.ts';
import { lockOrganizationRow, type OrganizationTotals } from '../db/sql/tasks.ts';
import { AppError, errors } from '../lib/errors.ts';

export type OrgCaps = Config['orgCaps'];

const MB = 1024 * 1024;

type CapName =
  | 'tasks'
  | 'taskPromptBytes'
  | 'destinations'
  | 'skills'
  | 'skillContentBytes'
  | 'sources'
  | 'apiKeys';

/** The 403 for a create or change that would take the organization past one of its caps. */
export function orgCapReached(cap: CapName, caps: OrgCaps): AppError {
  const message = {
    tasks: `An organization may have at most ${caps.tasks} tasks, paused and completed ones included; delete one first`,
    taskPromptBytes: `The prompts of an organization's tasks may total at most ${caps.taskPromptBytes / MB} MB (UTF-8); shorten or delete some first`,
    destinations: `An organization's tasks may have at most ${caps.destinations} destinations in all; remove some first`,
    skills: `An organization may have at most ${caps.skills} skills; delete one first`,
    skillContentBytes: `The content of an organization's skills may total at most ${caps.skillContentBytes / MB} MB (UTF-8); shorten or delete some first`,
    sources: `An organization may have at most ${caps.sources} sources; delete one first`,
    apiKeys: `An organization may have at most ${caps.apiKeys} API keys that are not revoked; revoke one first`,
  }[cap];
  return errors.planLimit(message);
}

export const utf8Bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

/**
 * Locks the organization's row and checks that a change of its tasks by these amounts keeps
 * it within its caps. Only growth is checked: a change that shrinks an organization already
 * over a lowered cap is allowed.
 */
export async function checkTaskTotals(
  tx: Queryable,
  organizationId: string,
  caps: OrgCaps,
  delta: { promptBytes: number; destinations: number },
): Promise<OrganizationTotals> {
  const org = await lockOrganizationRow(tx, organizationId);
  if (!org) throw errors.notFound('Organization');
  if (delta.promptBytes > 0 && org.task_prompt_bytes + delta.promptBytes > caps.taskPromptBytes)
    throw orgCapReached('taskPromptBytes', caps);
  if (delta.destinations > 0 && org.total_destinations + delta.destinations > caps.destinations)
    throw orgCapReached('destinations', caps);
  return org;
}

/**
 * Locks the organization's row and returns its skills and their content bytes. Every skill
 * create and content change takes this lock first (before any skill row, as task creates do),
 * so the totals read after it are exact.
 */
export async function lockSkillTotals(
  tx: Queryable,
  organizationId: string,
): Promise<{ skills: number; contentBytes: number }> {
  if (!(await lockOrganizationRow(tx, organizationId))) throw errors.notFound('Organization');
  return skillTotals(tx, organizationId);
}

/** Throws when adding `skills` skills and `contentBytes` of content would pass a cap (growth only). */
export function assertSkillCaps(
  totals: { skills: number; contentBytes: number },
  caps: OrgCaps,
  delta: { skills: number; contentBytes: number },
): void {
  if (delta.skills > 0 && totals.skills + delta.skills > caps.skills) throw orgCapReached('skills', caps);
  if (delta.contentBytes > 0 && totals.contentBytes + delta.contentBytes > caps.skillContentBytes)
    throw orgCapReached('skillContentBytes', caps);
}

/** Locks the organization's row and checks that one more source stays within the cap. */
export async function checkSourceTotals(tx: Queryable, organizationId: string, caps: OrgCaps): Promise<void> {
  if (!(await lockOrganizationRow(tx, organizationId))) throw errors.notFound('Organization');
  if ((await sourceCount(tx, organizationId)) + 1 > caps.sources) throw orgCapReached('sources', caps);
}

/** Locks the organization's row and checks that one more key stays within the cap (keys not revoked). */
export async function checkApiKeyTotals(tx: Queryable, organizationId: string, caps: OrgCaps): Promise<void> {
  if (!(await lockOrganizationRow(tx, organizationId))) throw errors.notFound('Organization');
  if ((await unrevokedApiKeyCount(tx, organizationId)) + 1 > caps.apiKeys)
    throw orgCapReached('apiKeys', caps);
}

/**
 * Source connection tests running in this process, per organization. A test holds a
 * connection (for a stdio source, a process) for up to its time limit, so an organization may
 * run only a few at once; the rest are refused at once rather than queued.
 */
export class SourceTestSlots {
  readonly #max: number;
  readonly #running = new Map<string, number>();

  constructor(max: number) {
    this.#max = max;
  }

  /** Runs `fn` in one of the organization's slots, or throws 429 when all are taken. */
  async run<T>(organizationId: string, fn: () => Promise<T>): Promise<T> {
    const running = this.#running.get(organizationId) ?? 0;
    if (running >= this.#max) {
      throw new AppError(
        'rate_limited',
        `At most ${this.#max} source tests may run at once per organization; retry when one has finished`,
        { headers: { 'retry-after': '5' } },
      );
    }
    this.#running.set(organizationId, running + 1);
    try {
      return await fn();
    } finally {
      const left = (this.#running.get(organizationId) ?? 1) - 1;
      if (left > 0) this.#running.set(organizationId, left);
      else this.#running.delete(organizationId);
    }
  }
}
