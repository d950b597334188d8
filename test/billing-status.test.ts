import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { addRun, insertTask, type Org, useTestService } from './helpers/fixtures.ts';

const completed = (costCents: number) => ({ status: 'completed' as const, costCents, tokensUsed: 1000 });

describe('billing status usage', () => {
  const fx = useTestService();

  const status = (o: Org) =>
    fx.svc.call({
      method: 'GET',
      url: `/api/svc/billing/status?organizationId=${o.organizationId}`,
      key: o.apiKey,
    });

  test('a new organization has used nothing', async () => {
    const org = await fx.svc.createOrg();
    const res = await status(org);
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.runsUsed, 0);
    assert.equal(res.body.tasksCount, 0);
    assert.equal(res.body.usageCostCents, 0);
    assert.equal(res.body.usageCreditsCents, 100);
    assert.equal(res.body.usersCount, 0);
  });

  test('runs of this period, active tasks and cost beyond the credits are counted exactly', async () => {
    const org = await fx.svc.createOrg('free');
    const [row] = await fx.db.query<{ billing_period_start: Date }>(
      'SELECT billing_period_start FROM organizations WHERE id = $1',
      [org.organizationId],
    );
    const periodStart = row?.billing_period_start ?? new Date();
    const active = await insertTask(fx.db, org.organizationId);
    const doomed = await insertTask(fx.db, org.organizationId);
    await insertTask(fx.db, org.organizationId, { status: 'paused' });
    await insertTask(fx.db, org.organizationId, { status: 'completed' });
    // Before the period: neither counted nor charged.
    await addRun(
      fx.db,
      org.organizationId,
      active,
      completed(500),
      new Date(periodStart.getTime() - 86_400_000),
    );
    await addRun(fx.db, org.organizationId, active, completed(60.5));
    await addRun(fx.db, org.organizationId, doomed, completed(70));
    await addRun(fx.db, org.organizationId, doomed); // still pending: counted, no cost yet

    const res = await status(org);
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.runsUsed, 3);
    assert.equal(res.body.tasksCount, 2);
    assert.equal(res.body.usageCreditsCents, 100);
    assert.equal(res.body.usageCostCents, 30.5);

    await fx.db.query('DELETE FROM tasks WHERE id = $1', [doomed]);
    const after = await status(org);
    assert.equal(after.body.runsUsed, 3, 'deleting a task never lowers runsUsed');
    assert.equal(after.body.usageCostCents, 30.5, 'nor the usage cost');
    assert.equal(after.body.tasksCount, 1);
  });

  test('a cost within the plan credits is no usage charge', async () => {
    const org = await fx.svc.createOrg('paid');
    const task = await insertTask(fx.db, org.organizationId);
    await addRun(fx.db, org.organizationId, task, completed(1999));
    const res = await status(org);
    assert.equal(res.body.runsUsed, 1);
    assert.equal(res.body.usageCreditsCents, 2000);
    assert.equal(res.body.usageCostCents, 0);
  });
});
