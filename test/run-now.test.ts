// Run now in one round trip when nothing could refuse it (insertRunIfUnrestricted), and in a
// transaction that says why otherwise: the refusals hold whichever way a run now goes.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { insertRunIfUnrestricted } from '../src/db/sql/runs.ts';
import { effectiveLimits, PLANS } from '../src/domain/plans.ts';
import { LIMITED_PLANS } from '../src/domain/run-limit.ts';
import { newTask, type Org, unlimited } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';

describe('run now', () => {
  let svc: TestService;
  let paid: Org;
  before(async () => {
    svc = await startTestService();
    paid = await svc.createOrg('paid');
    await unlimited(svc, paid);
  });
  after(() => svc.close());

  const runNow = (org: Org, taskId: string) =>
    svc.call({ method: 'POST', url: `/api/svc/tasks/${taskId}/run`, key: org.apiKey });
  const runsOf = async (taskId: string) =>
    (
      await svc.testDb.db.query<{ n: number }>('SELECT count(*)::int AS n FROM runs WHERE task_id = $1', [
        taskId,
      ])
    )[0]?.n;
  const fastPath = (org: Org, taskId: string) =>
    insertRunIfUnrestricted(
      svc.testDb.db,
      {
        id: randomUUID(),
        organizationId: org.organizationId,
        taskId,
        slotAt: null,
        trigger: 'manual',
        now: new Date(),
      },
      LIMITED_PLANS,
    );

  test('ten run nows of one task at once create one run; the others are told a run is in flight', async () => {
    const task = await newTask(svc, paid);
    const answers = await Promise.all(Array.from({ length: 10 }, () => runNow(paid, task.id)));
    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(statuses, [202, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
    assert.equal(await runsOf(task.id), 1);
    const refused = answers.find((a) => a.status === 409);
    assert.match(refused?.body.error.message, /already pending or running/);
  });

  test('a run now on an organization without a run limit is created in one round trip, with its ledger row', async () => {
    const task = await newTask(svc, paid);
    const run = await fastPath(paid, task.id);
    assert.ok(run, 'created without the transaction');
    assert.equal(run.status, 'pending');
    assert.ok(run.created_at instanceof Date);
    const [ledger] = await svc.testDb.db.query<{ status: string }>(
      'SELECT status FROM usage_ledger WHERE run_id = $1',
      [run.id],
    );
    assert.equal(ledger?.status, 'pending');
    assert.equal(await fastPath(paid, task.id), undefined, 'not a second one while it is pending');
  });

  test('a run limit set by an override on a plan without one still refuses the run beyond it', async () => {
    const org = await svc.createOrg('paid');
    await unlimited(svc, org);
    const limit = await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${org.organizationId}`,
      admin: true,
      body: { runsLimit: 1 },
    });
    assert.equal(limit.status, 200, limit.raw);
    const first = await newTask(svc, org);
    const second = await newTask(svc, org);
    assert.equal(await fastPath(org, first.id), undefined, 'the one round trip is not taken');
    assert.equal((await runNow(org, first.id)).status, 202);
    const refused = await runNow(org, second.id);
    assert.equal(refused.status, 403, refused.raw);
    assert.match(refused.body.error.message, /limit of 1 runs/);
    assert.equal(await runsOf(second.id), 0);
  });

  test('a free organization whose override lifts the run limit takes the one round trip', async () => {
    const org = await svc.createOrg('free');
    const lifted = await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${org.organizationId}`,
      admin: true,
      body: { runsLimit: 'unlimited' },
    });
    assert.equal(lifted.status, 200, lifted.raw);
    const task = await newTask(svc, org);
    assert.ok(await fastPath(org, task.id));
  });

  test('a free organization (run limit of its plan) and a task with a monthly cost limit are created by the transaction', async () => {
    const free = await svc.createOrg('free');
    const task = await newTask(svc, free);
    assert.equal(await fastPath(free, task.id), undefined);
    assert.equal((await runNow(free, task.id)).status, 202);
    const capped = await newTask(svc, paid, { monthlyCostLimitCents: 500 });
    assert.equal(await fastPath(paid, capped.id), undefined);
    assert.equal((await runNow(paid, capped.id)).status, 202);
  });

  test('the one round trip is taken exactly when effectiveLimits gives no run limit, for every plan and kind of override', async () => {
    // The fast path restates the run-limit rule in SQL: this lists every plan with every kind
    // of override so that the two cannot drift apart unnoticed.
    const overrides = [{}, { runsLimit: null }, { runsLimit: 5 }, { tasksLimit: 3 }];
    const org = await svc.createOrg('free');
    const task = await newTask(svc, org);
    for (const plan of PLANS) {
      for (const override of overrides) {
        await svc.testDb.db.query('UPDATE organizations SET plan = $2, limit_overrides = $3 WHERE id = $1', [
          org.organizationId,
          plan,
          JSON.stringify(override),
        ]);
        const run = await fastPath(org, task.id);
        const unlimitedRuns = effectiveLimits(plan, override).runsLimit === null;
        assert.equal(Boolean(run), unlimitedRuns, `${plan} with ${JSON.stringify(override)}`);
        if (run) await svc.testDb.db.query('DELETE FROM runs WHERE id = $1', [run.id]);
      }
    }
  });

  test("an unknown task and another organization's task are not found, and nothing is written", async () => {
    const other = await svc.createOrg('paid');
    const theirs = await newTask(svc, other);
    assert.equal((await runNow(paid, theirs.id)).status, 404);
    assert.equal((await runNow(paid, randomUUID())).status, 404);
    assert.equal(await fastPath(paid, theirs.id), undefined);
    assert.equal(await runsOf(theirs.id), 0);
  });
});
