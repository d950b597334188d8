import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Queryable } from '../src/db/db.ts';
import { insertRun } from '../src/db/sql/runs.ts';
import { recordRunOutcome } from '../src/db/sql/usage.ts';
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

async function addRun(
  db: Queryable,
  organizationId: string,
  taskId: string,
  costCents: number,
  at = new Date(),
) {
  const run = await insertRun(db, {
    id: randomUUID(),
    organizationId,
    taskId,
    slotAt: null,
    trigger: 'manual',
    now: at,
  });
  await recordRunOutcome(db, run.id, { status: 'completed', costCents, tokensUsed: 1000 });
  return run.id;
}

describe('billing status usage', () => {
  let svc: TestService;
  let db: Queryable;

  const status = (o: { organizationId: string; apiKey: string }) =>
    svc.call({
      method: 'GET',
      url: `/api/svc/billing/status?organizationId=${o.organizationId}`,
      key: o.apiKey,
    });

  before(async () => {
    svc = await startTestService();
    db = svc.testDb.db;
  });
  after(() => svc.close());

  test('a new organization has used nothing', async () => {
    const org = await svc.createOrg();
    const res = await status(org);
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.runsUsed, 0);
    assert.equal(res.body.tasksCount, 0);
    assert.equal(res.body.usageCostCents, 0);
    assert.equal(res.body.usageCreditsCents, 100);
    assert.equal('usersCount' in res.body, false);
  });

  test('runs of this period, active tasks and cost beyond the credits are counted exactly', async () => {
    const org = await svc.createOrg('free');
    const [row] = await db.query<{ billing_period_start: Date }>(
      'SELECT billing_period_start FROM organizations WHERE id = $1',
      [org.organizationId],
    );
    const periodStart = row?.billing_period_start ?? new Date();
    const active = await insertTask(db, org.organizationId);
    const doomed = await insertTask(db, org.organizationId);
    await insertTask(db, org.organizationId, 'paused');
    await insertTask(db, org.organizationId, 'completed');
    // Before the period: neither counted nor charged.
    await addRun(db, org.organizationId, active, 500, new Date(periodStart.getTime() - 86_400_000));
    await addRun(db, org.organizationId, active, 60.5);
    await addRun(db, org.organizationId, doomed, 70);
    await insertRun(db, {
      id: randomUUID(),
      organizationId: org.organizationId,
      taskId: doomed,
      slotAt: null,
      trigger: 'manual',
      now: new Date(),
    });

    const res = await status(org);
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.runsUsed, 3);
    assert.equal(res.body.tasksCount, 2);
    assert.equal(res.body.usageCreditsCents, 100);
    assert.equal(res.body.usageCostCents, 30.5);

    await db.query('DELETE FROM tasks WHERE id = $1', [doomed]);
    const after = await status(org);
    assert.equal(after.body.runsUsed, 3, 'deleting a task never lowers runsUsed');
    assert.equal(after.body.usageCostCents, 30.5, 'nor the usage cost');
    assert.equal(after.body.tasksCount, 1);
  });

  test('a cost within the plan credits is no usage charge', async () => {
    const org = await svc.createOrg('paid');
    const task = await insertTask(db, org.organizationId);
    await addRun(db, org.organizationId, task, 1999);
    const res = await status(org);
    assert.equal(res.body.runsUsed, 1);
    assert.equal(res.body.usageCreditsCents, 2000);
    assert.equal(res.body.usageCostCents, 0);
  });
});
