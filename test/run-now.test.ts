// Run now in one round trip when nothing could refuse it (insertRunIfUnrestricted), and in a
// transaction that says why otherwise: the refusals hold whichever way a run now goes.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { insertRunIfUnrestricted } from '../src/db/sql/run-now.ts';
import { effectiveLimits, PLANS } from '../src/domain/plans.ts';
import { LIMITED_PLANS } from '../src/domain/run-limit.ts';
import { newTask, type Org, unlimited } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

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
  const newRun = (org: Org, taskId: string) => ({
    id: randomUUID(),
    organizationId: org.organizationId,
    taskId,
    slotAt: null,
    trigger: 'manual' as const,
    now: new Date(),
  });
  const fastPath = async (org: Org, taskId: string) =>
    (await insertRunIfUnrestricted(svc.testDb.db, newRun(org, taskId), LIMITED_PLANS))?.run;

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

  const created = (org: Org, taskId: string, orgLimit = 2) =>
    insertRunIfUnrestricted(svc.testDb.db, newRun(org, taskId), LIMITED_PLANS, {
      workerId: 'handoff-test-worker',
      now: null,
      leaseMs: 60_000,
      limit: 1,
      orgLimit,
    });
  const statusOf = async (runId: string) =>
    (
      await svc.testDb.db.query<{ status: string; lease_owner: string | null }>(
        'SELECT status, lease_owner FROM runs WHERE id = $1',
        [runId],
      )
    )[0];

  test('a run created with a place reserved is claimed by that worker in the same transaction, with its context, and not announced', async () => {
    const org = await svc.createOrg('paid');
    await unlimited(svc, org);
    const heard: string[] = [];
    const unlisten = await svc.testDb.db.listen('svc_runs', (p) => heard.push(p));
    try {
      const claimedTask = await newTask(svc, org);
      const made = await created(org, claimedTask.id);
      assert.ok(made?.claimed, 'claimed at its creation');
      assert.equal(made.claimed.run.id, made.run.id);
      assert.equal(made.claimed.run.status, 'running');
      assert.equal(made.claimed.run.attempts, 1);
      assert.equal(made.claimed.context?.task.prompt, claimedTask.prompt);
      assert.equal(made.run.status, 'pending', 'the answer is the run as created');
      assert.deepEqual(await statusOf(made.run.id), {
        status: 'running',
        lease_owner: 'handoff-test-worker',
      });
      // Notifications come in commit order: once the next run's arrives, the first had none.
      const pendingTask = await newTask(svc, org);
      const older = await fastPath(org, pendingTask.id);
      assert.ok(older);
      await waitFor('the pending run is announced', async () => heard.includes(older.id) || undefined);
      assert.ok(!heard.includes(made.run.id), 'the claimed run was not announced');
    } finally {
      await unlisten();
    }
  });

  test('a run created with a place reserved stays pending, and is announced, when an older run of its organization waits or the organization is at its limit', async () => {
    const org = await svc.createOrg('paid');
    await unlimited(svc, org);
    const heard: string[] = [];
    const unlisten = await svc.testDb.db.listen('svc_runs', (p) => heard.push(p));
    try {
      const waiting = await fastPath(org, (await newTask(svc, org)).id);
      assert.ok(waiting);
      const behind = await created(org, (await newTask(svc, org)).id);
      assert.ok(behind && !behind.claimed, 'the older run goes first');
      assert.equal((await statusOf(behind.run.id))?.status, 'pending');
      await waitFor('the run left pending announced', async () => heard.includes(behind.run.id) || undefined);

      const busy = await svc.createOrg('paid');
      await unlimited(svc, busy);
      const first = await created(busy, (await newTask(svc, busy)).id, 1);
      assert.ok(first?.claimed);
      const second = await created(busy, (await newTask(svc, busy)).id, 1);
      assert.ok(second && !second.claimed, 'one running run is the limit');
      assert.equal((await statusOf(second.run.id))?.status, 'pending');
      await waitFor('the run left pending announced', async () => heard.includes(second.run.id) || undefined);
    } finally {
      await unlisten();
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
