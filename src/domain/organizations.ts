import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/db.ts';
import { holdTransactionLock, LOCK_KEYS } from '../db/sql/advisory-locks.ts';
import {
  countOrganizations,
  findOrganization,
  insertOrganization,
  listOrganizations,
  type OrganizationRow,
  updateOrganization,
} from '../db/sql/organizations.ts';
import { newId } from '../lib/ids.ts';
import { createApiKey } from './api-keys.ts';
import type { Deps } from './deps.ts';
import { effectiveLimits, type LimitOverrides, type Plan, type PlanLimits } from './plans.ts';

export interface OrganizationView {
  id: string;
  name: string;
  plan: Plan;
  /** The limits in force: the plan's, with the overrides applied. */
  limits: PlanLimits;
  /** Operator overrides of the plan's limits. */
  overrides: LimitOverrides;
  billingPeriodStart: string;
  createdAt: string;
  updatedAt: string;
}

export function organizationView(row: OrganizationRow): OrganizationView {
  return {
    id: row.id,
    name: row.name,
    plan: row.plan,
    limits: effectiveLimits(row.plan, row.limit_overrides),
    overrides: row.limit_overrides,
    billingPeriodStart: row.billing_period_start.toISOString(),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const webhookSecretAad = (organizationId: string) => `org:${organizationId}:webhook_secret`;

/** A Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes. */
function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export interface CreatedOrganization {
  organization: OrganizationView;
  /** The first API key's value; undefined when none was asked for. */
  apiKey: string | undefined;
  webhookSecret: string;
}

export interface NewOrganization {
  name: string;
  plan?: Plan;
  keyName?: string;
  /** Create a first API key (default true); sign-up does not: people make their own keys. */
  withKey?: boolean;
}

/** Creates an organization with its webhook secret and a first API key, in one transaction. */
export async function createOrganization(
  deps: Pick<Deps, 'db' | 'clock' | 'secretBox'>,
  input: Omit<NewOrganization, 'withKey'>,
): Promise<CreatedOrganization & { apiKey: string }> {
  const created = await deps.db.transaction((tx) => insertOrganizationWithKey(deps, tx, input));
  if (created.apiKey === undefined) throw new Error('the organization was created without its first key');
  return { ...created, apiKey: created.apiKey };
}

/** The body of createOrganization, for callers that already hold a transaction. */
export async function insertOrganizationWithKey(
  deps: Pick<Deps, 'clock' | 'secretBox'>,
  tx: Queryable,
  input: NewOrganization,
): Promise<CreatedOrganization> {
  const id = newId();
  const webhookSecret = generateWebhookSecret();
  const row = await insertOrganization(tx, {
    id,
    name: input.name,
    plan: input.plan ?? 'free',
    webhookSecretSealed: deps.secretBox.encrypt(webhookSecret, webhookSecretAad(id)),
    now: deps.clock.now(),
  });
  const apiKey =
    input.withKey === false
      ? undefined
      : (await createApiKey(deps, tx, { organizationId: id, name: input.keyName ?? 'Default key' })).apiKey;
  return { organization: organizationView(row), apiKey, webhookSecret };
}

export async function getOrganization(
  deps: Pick<Deps, 'db'>,
  id: string,
): Promise<OrganizationView | undefined> {
  const row = await findOrganization(deps.db, id);
  return row && organizationView(row);
}

export async function listAllOrganizations(deps: Pick<Deps, 'db'>): Promise<OrganizationView[]> {
  return (await listOrganizations(deps.db)).map(organizationView);
}

/**
 * On the first start with an empty database, a demo organization lets a newcomer call the API
 * at once. The count and the insert share one transaction under an advisory lock, so
 * processes starting together make one, not two.
 */
export async function createDemoOrganizationIfEmpty(
  deps: Pick<Deps, 'db' | 'clock' | 'secretBox'>,
): Promise<CreatedOrganization | undefined> {
  if ((await countOrganizations(deps.db)) > 0) return undefined;
  return deps.db.transaction(async (tx) => {
    await holdTransactionLock(tx, LOCK_KEYS.demoOrganization);
    if ((await countOrganizations(tx)) > 0) return undefined;
    return insertOrganizationWithKey(deps, tx, { name: 'Demo organization', keyName: 'Demo key' });
  });
}

/**
 * Operator changes: plan and limit overrides. For each override, a number sets it and null
 * removes it (the plan's value applies again); `runsLimit: "unlimited"` lifts the run cap.
 */
export interface OrganizationPatch {
  name?: string;
  plan?: Plan;
  rateLimitPerMinute?: number | null;
  tasksLimit?: number | null;
  runsLimit?: number | 'unlimited' | null;
  usersLimit?: number | null;
}

export async function patchOrganization(
  deps: Pick<Deps, 'db' | 'clock' | 'principals'>,
  id: string,
  patch: OrganizationPatch,
): Promise<OrganizationView | undefined> {
  const view = await deps.db.transaction(async (tx) => {
    const current = await findOrganization(tx, id);
    if (!current) return undefined;
    const overrides: LimitOverrides = { ...current.limit_overrides };
    const apply = <K extends keyof LimitOverrides>(key: K, value: LimitOverrides[K] | null | undefined) => {
      if (value === undefined) return;
      if (value === null) delete overrides[key];
      else overrides[key] = value;
    };
    apply('rateLimitPerMinute', patch.rateLimitPerMinute);
    apply('tasksLimit', patch.tasksLimit);
    apply('usersLimit', patch.usersLimit);
    if (patch.runsLimit === 'unlimited') overrides.runsLimit = null;
    else apply('runsLimit', patch.runsLimit);
    const row = await updateOrganization(tx, id, {
      ...(patch.name !== undefined && { name: patch.name }),
      ...(patch.plan !== undefined && { plan: patch.plan }),
      limitOverrides: overrides,
      now: deps.clock.now(),
    });
    return row && organizationView(row);
  });
  // Plan and limits are cached with the keys: every api process forgets them.
  if (view) await deps.principals.changed();
  return view;
}

/** The organization's webhook signing secret, in clear, for signing deliveries. */
export function openWebhookSecret(deps: Pick<Deps, 'secretBox'>, row: OrganizationRow): string {
  return deps.secretBox.decrypt(row.webhook_secret_sealed, webhookSecretAad(row.id));
}

/** The organization's webhook signing secret, in clear, for its owner to give its receivers. */
export async function webhookSecretOf(
  deps: Pick<Deps, 'db' | 'secretBox'>,
  organizationId: string,
): Promise<string | undefined> {
  const row = await findOrganization(deps.db, organizationId);
  return row && openWebhookSecret(deps, row);
}
