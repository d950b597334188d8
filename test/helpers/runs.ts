import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../src/db/db.ts';
import { insertRun } from '../../src/db/sql/runs.ts';
import { newId } from '../../src/lib/ids.ts';
import { type ModelReply, type ModelRequest, startModelServer } from './model-server.ts';
import { startTestService, type TestService } from './service.ts';
import { waitFor } from './wait.ts';

export type Org = { organizationId: string; apiKey: string };

/** A service with running scheduler and worker loops, its model provider a local server. */
export async function startWorkerService(
  reply: (prompt: string, index: number, request: ModelRequest) => ModelReply,
  env: Record<string, string> = {},
) {
  const model = await startModelServer((req, i) =>
    reply(req.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '', i, req),
  );
  const svc = await startTestService({
    startLoops: true,
    env: {
      SVC_MODEL_BASE_URL: model.url,
      SVC_MODEL_API_KEY: 'sk-test-model-key',
      SVC_RUN_LEASE_SECONDS: '1',
      ...env,
    },
  });
  return { svc, model };
}

/**
 * A run of the task written straight into the database, as run now creates one (none of the
 * API's checks): pending, or with `runningAs` held by that worker with a lease of a minute.
 */
export async function insertTestRun(
  db: Queryable,
  org: Org,
  taskId: string,
  o: { id?: string; now?: Date; runningAs?: string } = {},
): Promise<string> {
  const id = o.id ?? newId();
  await insertRun(db, {
    id,
    organizationId: org.organizationId,
    taskId,
    slotAt: null,
    trigger: 'manual',
    now: o.now ?? new Date(),
  });
  if (o.runningAs !== undefined) {
    await db.query(
      `UPDATE runs SET status = 'running', lease_owner = $2, lease_expires_at = now() + interval '1 minute'
        WHERE id = $1`,
      [id, o.runningAs],
    );
  }
  return id;
}

/** A daily task far in the future: only "run now" runs it. */
export async function newTask(svc: TestService, org: Org, extra: Record<string, unknown> = {}) {
  const res = await svc.call({
    method: 'POST',
    url: '/api/svc/tasks',
    key: org.apiKey,
    body: {
      organizationId: org.organizationId,
      name: 'Digest',
      prompt: `Prompt ${randomUUID()}`,
      schedule: 'daily',
      ...extra,
    },
  });
  assert.equal(res.status, 201, res.raw);
  return res.body as { id: string; prompt: string; model: string };
}

export async function runNow(svc: TestService, org: Org, taskId: string): Promise<string> {
  const res = await svc.call({ method: 'POST', url: `/api/svc/tasks/${taskId}/run`, key: org.apiKey });
  assert.equal(res.status, 202, res.raw);
  return res.body.id;
}

/**
 * The run as the API shows it once it has finished. The wait reads the database: polling the
 * API every 25 ms would spend the organization's rate limit within seconds, and every answer
 * after that is a 429 until the next minute.
 */
export async function finishedRun(svc: TestService, org: Org, runId: string, timeoutMs = 15_000) {
  await waitFor(
    `run ${runId} to finish`,
    async () => {
      const [row] = await svc.testDb.db.query<{ status: string }>('SELECT status FROM runs WHERE id = $1', [
        runId,
      ]);
      return row && ['completed', 'failed'].includes(row.status) ? row : undefined;
    },
    { timeoutMs },
  );
  const res = await svc.call({ method: 'GET', url: `/api/svc/runs/${runId}`, key: org.apiKey });
  assert.equal(res.status, 200, res.raw);
  return res.body;
}

/** Lifts the plan's task and rate limits, so a test can make as many tasks and calls as it needs. */
export async function unlimited(svc: TestService, org: Org) {
  await svc.call({
    method: 'PATCH',
    url: `/api/admin/organizations/${org.organizationId}`,
    admin: true,
    body: { tasksLimit: 1000, rateLimitPerMinute: 100000 },
  });
}

/** Creates a resource through the API and returns its body. */
export async function create(
  svc: TestService,
  org: Org,
  path: 'skills' | 'sources',
  body: Record<string, unknown>,
) {
  const res = await svc.call({
    method: 'POST',
    url: `/api/svc/${path}`,
    key: org.apiKey,
    body: { organizationId: org.organizationId, ...body },
  });
  assert.equal(res.status, 201, res.raw);
  return res.body;
}
