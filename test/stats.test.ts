import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { addRun, insertTask, useTestService } from './helpers/fixtures.ts';

describe('statistics', () => {
  const fx = useTestService({ orgs: ['free', 'free'] });

  const stats = (o = fx.org) =>
    fx.svc.call({ method: 'GET', url: `/api/svc/stats?organizationId=${o.organizationId}`, key: o.apiKey });

  /**
   * Two new organizations, the first with three tasks and five runs of known outcomes, the
   * second with one completed run. Each test seeds its own, so none depends on another's data.
   */
  async function seeded() {
    const mine = await fx.svc.createOrg();
    const theirs = await fx.svc.createOrg();
    const first = await insertTask(fx.db, mine.organizationId);
    const second = await insertTask(fx.db, mine.organizationId);
    await insertTask(fx.db, mine.organizationId, { status: 'paused' });
    await addRun(fx.db, mine.organizationId, first, {
      status: 'completed',
      costCents: 1.5,
      tokensUsed: 100,
    });
    await addRun(fx.db, mine.organizationId, first, {
      status: 'completed',
      costCents: 2.25,
      tokensUsed: 200,
    });
    await addRun(fx.db, mine.organizationId, first, { status: 'failed', costCents: 0.5, tokensUsed: 10 });
    await addRun(fx.db, mine.organizationId, second);
    await addRun(fx.db, mine.organizationId, second, { status: 'running', costCents: 0, tokensUsed: 0 });
    const theirTask = await insertTask(fx.db, theirs.organizationId);
    await addRun(fx.db, theirs.organizationId, theirTask, {
      status: 'completed',
      costCents: 99,
      tokensUsed: 9999,
    });
    return { mine, theirs, first };
  }

  test('a new organization has all statistics at zero', async () => {
    const res = await stats(await fx.svc.createOrg());
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

  test('tasks and run outcomes are counted exactly', async () => {
    // Another organization's figures never leak in.
    const { mine } = await seeded();
    const res = await stats(mine);
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
    const { mine, first } = await seeded();
    await fx.db.query('DELETE FROM tasks WHERE id = $1', [first]);
    const left = await fx.db.query('SELECT 1 FROM runs WHERE task_id = $1', [first]);
    assert.equal(left.length, 0, 'the runs went with the task');
    const res = await stats(mine);
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
    const { theirs } = await seeded();
    const res = await stats(theirs);
    assert.equal(res.body.totalRuns, 1);
    assert.equal(res.body.totalCostCents, 99);
    assert.equal(res.body.totalTasks, 1);
  });

  test("statistics of another organization's id are refused with 401", async () => {
    const res = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/stats?organizationId=${fx.other.organizationId}`,
      key: fx.org.apiKey,
    });
    assert.equal(res.status, 401);
  });

  test('statistics refuse unknown query parameters', async () => {
    const res = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/stats?organizationId=${fx.org.organizationId}&limit=5`,
      key: fx.org.apiKey,
    });
    assert.equal(res.status, 400);
  });
});
