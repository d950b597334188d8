import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Queryable } from '../src/db/db.ts';
import { insertRun } from '../src/db/sql/runs.ts';
import { type RunOutcome, recordRunOutcome } from '../src/db/sql/usage.ts';
import { startTestService, type TestService } from './helpers/service.ts';

async function insertTask(db: Queryable, organizationId: string, status = 'active'): Promise<string> {
  const id = randomUUID();
  await db.query(
    `INSERT INTO tasks (id, organization_id, name, prompt, model, schedule, status, created_at, updated_at)
     VALUES ($1, $2, 'A task', 'Say hello', 'openai/gpt-4o-mini', 'daily', $3, now(), now())`,
    [id, organizationId, status],
  );
  return id;
}

async function addRun(db: Queryable, organizationId: string, taskId: string, outcome?: RunOutcome) {
  const run = await insertRun(db, {
    id: randomUUID(),
    organizationId,
    taskId,
    slotAt: null,
    trigger: 'manual',
    now: new Date(),
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

describe('statistics', () => {
  let svc: TestService;
  let db: Queryable;
  let org: { organizationId: string; apiKey: string };
  let other: { organizationId: string; apiKey: string };

  const stats = (o = org) =>
    svc.call({ method: 'GET', url: `/api/svc/stats?organizationId=${o.organizationId}`, key: o.apiKey });

  before(async () => {
    svc = await startTestService();
    db = svc.testDb.db;
    org = await svc.createOrg();
    other = await svc.createOrg();
  });
  after(() => svc.close());

  test('a new organization has all statistics at zero', async () => {
    const res = await stats();
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body, {
      activeTasks: 0,
      totalTasks: 0,
      totalRuns: 0,
      successfulRuns: 0,
      failedRuns: 0,
      totalCostCents: 0,
      totalTokensUsed: 0,
    });
  });

  let first: string;
  test('tasks and run outcomes are counted exactly', async () => {
    first = await insertTask(db, org.organizationId);
    const second = await insertTask(db, org.organizationId);
    await insertTask(db, org.organizationId, 'paused');
    await addRun(db, org.organizationId, first, { status: 'completed', costCents: 1.5, tokensUsed: 100 });
    await addRun(db, org.organizationId, first, { status: 'completed', costCents: 2.25, tokensUsed: 200 });
    await addRun(db, org.organizationId, first, { status: 'failed', costCents: 0.5, tokensUsed: 10 });
    await addRun(db, org.organizationId, second);
    await addRun(db, org.organizationId, second, { status: 'running', costCents: 0, tokensUsed: 0 });
    // Another organization's figures never leak in.
    const theirs = await insertTask(db, other.organizationId);
    await addRun(db, other.organizationId, theirs, { status: 'completed', costCents: 99, tokensUsed: 9999 });

    const res = await stats();
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body, {
      activeTasks: 2,
      totalTasks: 3,
      totalRuns: 5,
      successfulRuns: 2,
      failedRuns: 1,
      totalCostCents: 4.25,
      totalTokensUsed: 310,
    });
  });

  test('deleting a task lowers the task counts but never the run figures', async () => {
    await db.query('DELETE FROM tasks WHERE id = $1', [first]);
    const left = await db.query('SELECT 1 FROM runs WHERE task_id = $1', [first]);
    assert.equal(left.length, 0, 'the runs went with the task');
    const res = await stats();
    assert.deepEqual(res.body, {
      activeTasks: 1,
      totalTasks: 2,
      totalRuns: 5,
      successfulRuns: 2,
      failedRuns: 1,
      totalCostCents: 4.25,
      totalTokensUsed: 310,
    });
  });

  test('the other organization sees only its own figures', async () => {
    const res = await stats(other);
    assert.equal(res.body.totalRuns, 1);
    assert.equal(res.body.totalCostCents, 99);
    assert.equal(res.body.totalTasks, 1);
  });

  test("statistics of another organization's id are refused with 401", async () => {
    const res = await svc.call({
      method: 'GET',
      url: `/api/svc/stats?organizationId=${other.organizationId}`,
      key: org.apiKey,
    });
    assert.equal(res.status, 401);
  });

  test('statistics refuse unknown query parameters', async () => {
    const res = await svc.call({
      method: 'GET',
      url: `/api/svc/stats?organizationId=${org.organizationId}&limit=5`,
      key: org.apiKey,
    });
    assert.equal(res.status, 400);
  });
});
