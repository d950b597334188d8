import { randomUUID } from 'node:crypto';
import { after, before } from 'node:test';
import type { Queryable } from '../../src/db/db.ts';
import { insertRun } from '../../src/db/sql/runs.ts';
import type { Clock } from '../../src/lib/clock.ts';
import { startTestService, type TestService } from './service.ts';

/** A run's final status, cost and tokens, as a test sets them on its ledger row. */
export interface RunOutcome {
  status: 'running' | 'completed' | 'failed';
  costCents: number;
  tokensUsed: number;
}

/**
 * Sets a run's status, cost and tokens in its ledger row, as the worker leaves them when a run
 * ends. False when the run has no row.
 */
export async function recordRunOutcome(db: Queryable, runId: string, outcome: RunOutcome): Promise<boolean> {
  const rows = await db.query(
    `UPDATE usage_ledger SET status = $2, cost_cents = $3, tokens_used = $4
     WHERE run_id = $1 RETURNING run_id`,
    [runId, outcome.status, outcome.costCents, Math.round(outcome.tokensUsed)],
  );
  return rows.length > 0;
}

/** An organization as the admin API creates it: its id, its first API key, its webhook secret. */
export interface Org {
  organizationId: string;
  apiKey: string;
  webhookSecret: string;
}

export interface ServiceFixture {
  /** The service; readable in tests and hooks, once the suite's `before` has run. */
  readonly svc: TestService;
  /** The service's database. */
  readonly db: Queryable;
  /** The organizations, one per plan asked for, in that order. */
  readonly orgs: readonly Org[];
  /** The first organization. */
  readonly org: Org;
  /** The second organization. */
  readonly other: Org;
}

export interface FixtureOptions {
  /** One organization is created per entry, on that plan. */
  orgs?: ('free' | 'paid')[];
  env?: Record<string, string>;
  clock?: Clock;
  /** An operator override of the organizations' requests per minute (for suites that send many). */
  rateLimitPerMinute?: number;
}

/**
 * Starts a test service with organizations before the tests of the enclosing `describe` and
 * closes it after them. Call it in the `describe` body; read its fields inside tests or hooks.
 */
export function useTestService(options: FixtureOptions = {}): ServiceFixture {
  let svc: TestService | undefined;
  const orgs: Org[] = [];
  before(async () => {
    svc = await startTestService({
      ...(options.env && { env: options.env }),
      ...(options.clock && { clock: options.clock }),
    });
    for (const plan of options.orgs ?? []) {
      const org = await svc.createOrg(plan);
      if (options.rateLimitPerMinute !== undefined) {
        const res = await svc.call({
          method: 'PATCH',
          url: `/api/admin/organizations/${org.organizationId}`,
          admin: true,
          body: { rateLimitPerMinute: options.rateLimitPerMinute },
        });
        if (res.status !== 200) throw new Error(`rate limit override: ${res.status} ${res.raw}`);
      }
      orgs.push(org);
    }
  });
  after(() => svc?.close());

  const ready = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is not ready: read the fixture inside a test or hook`);
    return value;
  };
  return {
    get svc() {
      return ready(svc, 'the service');
    },
    get db() {
      return ready(svc, 'the service').testDb.db;
    },
    orgs,
    get org() {
      return ready(orgs[0], 'the first organization');
    },
    get other() {
      return ready(orgs[1], 'the second organization');
    },
  };
}

/**
 * The calls of one resource's endpoints under /api/svc/, made with an organization's key:
 * `create` adds the organization's id to the body, `list` names it in the query.
 */
export function resourceCalls(fx: { readonly svc: TestService }, resource: 'tasks' | 'skills' | 'sources') {
  const url = `/api/svc/${resource}`;
  return {
    create: (o: Pick<Org, 'organizationId' | 'apiKey'>, body: Record<string, unknown>) =>
      fx.svc.call({
        method: 'POST',
        url,
        key: o.apiKey,
        body: { organizationId: o.organizationId, ...body },
      }),
    list: (o: Pick<Org, 'organizationId' | 'apiKey'>) =>
      fx.svc.call({ method: 'GET', url: `${url}?organizationId=${o.organizationId}`, key: o.apiKey }),
    get: (o: Pick<Org, 'apiKey'>, id: string) =>
      fx.svc.call({ method: 'GET', url: `${url}/${id}`, key: o.apiKey }),
    patch: (o: Pick<Org, 'apiKey'>, id: string, body: unknown) =>
      fx.svc.call({ method: 'PATCH', url: `${url}/${id}`, key: o.apiKey, body }),
    del: (o: Pick<Org, 'apiKey'>, id: string) =>
      fx.svc.call({ method: 'DELETE', url: `${url}/${id}`, key: o.apiKey }),
  };
}

/** A task row written straight into the database (no schedule computed); returns its id. */
export async function insertTask(
  db: Queryable,
  organizationId: string,
  options: { status?: 'active' | 'paused' | 'completed'; createdAt?: Date } = {},
): Promise<string> {
  const id = randomUUID();
  await db.query(
    `INSERT INTO tasks (id, organization_id, name, prompt, model, schedule, status, created_at, updated_at)
     VALUES ($1, $2, 'A task', 'Say hello', 'openai/gpt-4o-mini', 'daily', $3, $4, $4)`,
    [id, organizationId, options.status ?? 'active', options.createdAt ?? new Date()],
  );
  return id;
}

/**
 * A manual run of the task created at `at`, with its usage-ledger row; with an outcome, the run
 * and its ledger row carry that status, cost and tokens. Returns the run's id.
 */
export async function addRun(
  db: Queryable,
  organizationId: string,
  taskId: string,
  outcome?: RunOutcome,
  at = new Date(),
): Promise<string> {
  const run = await insertRun(db, {
    id: randomUUID(),
    organizationId,
    taskId,
    slotAt: null,
    trigger: 'manual',
    now: at,
  });
  if (outcome) {
    await db.query('UPDATE runs SET status = $2, cost_cents = $3, tokens_used = $4 WHERE id = $1', [
      run.id,
      outcome.status,
      outcome.costCents,
      outcome.tokensUsed,
    ]);
    await recordRunOutcome(db, run.id, outcome);
  }
  return run.id;
}
