import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DueTaskClaimer } from '../../src/scheduler/claimer.ts';
import { backendName } from '../helpers/db.ts';
import type { ModelServer } from '../helpers/model-server.ts';
import { newTask, type Org, startWorkerService } from '../helpers/runs.ts';
import { startTestService, type TestService } from '../helpers/service.ts';
import { assertRunsMatchRecords, recordedOutcomes } from '../helpers/slot-records.ts';
import { waitFor } from '../helpers/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * An organization at its plan's run limit costs nothing per slot: a due slot beyond the limit
 * creates no run (so nothing is executed and nothing delivered), the slot is consumed, and the
 * organization is told once per billing period (one log line, `runsLimitReachedAt` in its
 * billing status), however many schedulers and run-now calls meet the limit at once.
 */

const TOLD = "organization reached its plan's run limit";

async function limitOrg(svc: TestService, org: Org, runsLimit: number) {
  const res = await svc.call({
    method: 'PATCH',
    url: `/api/admin/organizations/${org.organizationId}`,
    admin: true,
    body: { tasksLimit: 1000, rateLimitPerMinute: 100000, runsLimit },
  });
  assert.equal(res.status, 200, res.raw);
}

/** Makes every active task of the organization due now (its slot one second ago). */
async function makeDue(svc: TestService, org: Org, taskIds?: string[]) {
  await svc.service.deps.db.query(
    `UPDATE tasks SET next_run_at = now() - interval '1 second'
      WHERE organization_id = $1 AND status = 'active' AND ($2::uuid[] IS NULL OR id = ANY($2::uuid[]))`,
    [org.organizationId, taskIds ?? null],
  );
}

async function runsOf(svc: TestService, org: Org) {
  return svc.service.deps.db.query<{ id: string; status: string; delivery_status: string | null }>(
    'SELECT id, status, delivery_status FROM runs WHERE organization_id = $1',
    [org.organizationId],
  );
}

const toldLines = (svc: TestService, org: Org) =>
  svc.logs.filter((l) => l.includes(TOLD) && l.includes(org.organizationId)).length;

async function billing(svc: TestService, org: Org) {
  const res = await svc.call({
    method: 'GET',
    url: `/api/svc/billing/status?organizationId=${org.organizationId}`,
    key: org.apiKey,
  });
  assert.equal(res.status, 200, res.raw);
  return res.body;
}

describe(`slots beyond the run limit (${backendName})`, () => {
  let svc: TestService;
  let model: ModelServer;
  let hook: WebhookReceiver;
  before(async () => {
    hook = await startWebhookReceiver();
    ({ svc, model } = await startWorkerService(() => ({}), { SVC_ALLOW_PRIVATE_URLS: 'true' }));
  });
  after(async () => {
    await svc.close();
    await model.close();
    await hook.close();
  });

  test('slots beyond the limit create no run and deliver nothing, are consumed, and the organization is told once', async () => {
    const org = await svc.createOrg('free');
    await limitOrg(svc, org, 3);
    const tasks = [];
    for (let i = 0; i < 5; i++) {
      tasks.push(
        await newTask(svc, org, { schedule: 'hourly', destinations: [{ type: 'webhook', value: hook.url }] }),
      );
    }
    const scheduler = svc.service.scheduler;
    assert.ok(scheduler);

    await makeDue(svc, org);
    await scheduler.tick();
    const runs = await waitFor('the created runs to be delivered', async () => {
      const all = await runsOf(svc, org);
      return all.length > 0 && all.every((r) => r.delivery_status === 'delivered') ? all : undefined;
    });
    assert.equal(runs.length, 3, 'three runs: the limit');
    assert.ok(runs.every((r) => r.status === 'completed'));
    assert.equal(hook.requests.length, 3, 'one delivery per run created, none for skipped slots');
    const due = await svc.service.deps.db.query(
      'SELECT id FROM tasks WHERE organization_id = $1 AND next_run_at <= now()',
      [org.organizationId],
    );
    assert.deepEqual(due, [], 'every slot is consumed, the skipped ones too');
    const status = await billing(svc, org);
    assert.equal(status.runsUsed, 3);
    assert.ok(status.runsLimitReachedAt, 'the billing status says when the limit was reached');
    assert.equal(toldLines(svc, org), 1);

    // The next slots: all beyond the limit. Nothing is created, the organization is not told again.
    await makeDue(svc, org);
    await scheduler.tick();
    assert.equal((await runsOf(svc, org)).length, 3);
    assert.equal(toldLines(svc, org), 1);
    assert.equal((await billing(svc, org)).runsLimitReachedAt, status.runsLimitReachedAt);

    // Run now at the limit: a clear 403, no run.
    const first = tasks[0];
    assert.ok(first);
    const now = await svc.call({ method: 'POST', url: `/api/svc/tasks/${first.id}/run`, key: org.apiKey });
    assert.equal(now.status, 403, now.raw);
    assert.equal(now.body.error.code, 'plan_limit_exceeded');
    assert.match(now.body.error.message, /limit of 3 runs per billing period was reached/);
    assert.equal((await runsOf(svc, org)).length, 3);
    assert.equal(toldLines(svc, org), 1);
    assert.equal(hook.requests.length, 3);

    const metrics = (await svc.call({ method: 'GET', url: '/metrics' })).raw;
    assert.match(metrics, /svc_scheduler_slots_total\{outcome="skipped_run_limit"\} 7/);
    const rows = <T>(sql: string, params?: unknown[]) => svc.service.deps.db.query<T>(sql, params);
    const ids = tasks.map((t) => t.id);
    assert.deepEqual(await recordedOutcomes(rows, ids), {
      ran: 3,
      missed: 0,
      skipped_overlap: 0,
      skipped_budget: 0,
      skipped_run_limit: 7,
    });
    await assertRunsMatchRecords(rows, ids);
  });
});

describe(`the run limit under concurrency (${backendName})`, () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService();
  });
  after(() => svc.close());

  test('several schedulers and run-now calls at once create exactly the runs the limit allows, and tell once', async () => {
    const org = await svc.createOrg('free');
    const LIMIT = 7;
    await limitOrg(svc, org, LIMIT);
    const scheduled = [];
    for (let i = 0; i < 24; i++) scheduled.push((await newTask(svc, org, { schedule: 'hourly' })).id);
    const onDemand = [];
    for (let i = 0; i < 10; i++) onDemand.push((await newTask(svc, org)).id);
    await makeDue(svc, org, scheduled);

    const schedulers = Array.from({ length: 3 }, () => new DueTaskClaimer(svc.service.deps));
    const [ticks, answers] = await Promise.all([
      Promise.all(schedulers.map((s) => s.tick())),
      Promise.all(
        onDemand.map((id) => svc.call({ method: 'POST', url: `/api/svc/tasks/${id}/run`, key: org.apiKey })),
      ),
    ]);
    const accepted = answers.filter((a) => a.status === 202).length;
    assert.ok(
      answers.every(
        (a) => a.status === 202 || (a.status === 403 && a.body.error.code === 'plan_limit_exceeded'),
      ),
      JSON.stringify(answers.map((a) => a.status)),
    );
    const created = ticks.reduce((n, t) => n + t.runsCreated, 0);
    const skipped = ticks.reduce((n, t) => n + t.skippedRunLimit, 0);
    assert.equal((await runsOf(svc, org)).length, LIMIT);
    assert.equal(created + accepted, LIMIT);
    assert.equal(created + skipped, scheduled.length, 'every due slot is either run or skipped');
    // Each of those slots has exactly one record, saying which.
    const rows = <T>(sql: string, params?: unknown[]) => svc.service.deps.db.query<T>(sql, params);
    assert.deepEqual(await recordedOutcomes(rows, scheduled), {
      ran: created,
      missed: 0,
      skipped_overlap: 0,
      skipped_budget: 0,
      skipped_run_limit: skipped,
    });
    const perTask = await rows<{ n: number }>(
      'SELECT count(*)::int AS n FROM task_slots WHERE task_id = ANY($1::uuid[]) GROUP BY task_id',
      [scheduled],
    );
    assert.equal(perTask.length, scheduled.length);
    assert.ok(
      perTask.every((r) => r.n === 1),
      'one record per slot',
    );
    await assertRunsMatchRecords(rows, scheduled);
    assert.equal((await billing(svc, org)).runsUsed, LIMIT);
    assert.equal(toldLines(svc, org), 1);
  });
});
