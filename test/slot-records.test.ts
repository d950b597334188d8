import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { ManualClock } from '../src/lib/clock.ts';
import { DueTaskClaimer } from '../src/scheduler/claimer.ts';
import { MISSED_RECORDS_PER_CLAIM } from '../src/scheduler/due-slot.ts';
import { SLOT_RECORDS_PER_TASK, SLOT_RECORDS_PRUNED_TO } from '../src/scheduler/slot-records.ts';
import { backendName } from './helpers/db.ts';
import { startTestService, type TestService } from './helpers/service.ts';

type Org = { organizationId: string; apiKey: string };

/**
 * The record of every slot (GET /tasks/{id}/slots), the upcoming slots with their local times
 * and DST notes, the schedule preview, and the monthly cost limit, on a manual clock.
 */
describe(`slot records, upcoming slots, schedule preview and the cost limit (${backendName})`, () => {
  const clock = new ManualClock('2027-05-03T10:20:00Z');
  let svc: TestService;
  let scheduler: DueTaskClaimer;
  let org: Org;

  const call = (method: string, url: string, body?: unknown, who: Org = org) =>
    svc.call({ method, url, key: who.apiKey, ...(body !== undefined && { body }) });
  const createTask = async (extra: Record<string, unknown>) => {
    const res = await call('POST', '/api/svc/tasks', {
      organizationId: org.organizationId,
      name: 'Report',
      prompt: 'Write the report',
      ...extra,
    });
    assert.equal(res.status, 201, res.raw);
    return res.body as { id: string; nextRunAt: string | null; monthlyCostLimitCents?: number };
  };
  const slotsOf = async (id: string, query = '') => {
    const res = await call('GET', `/api/svc/tasks/${id}/slots${query}`);
    assert.equal(res.status, 200, res.raw);
    return res.body as { slotAt: string; outcome: string; runId?: string; reason?: string; slots?: number }[];
  };
  /** The task's notice jobs (task notices are delivery jobs without a run). */
  const noticesOf = async (taskId: string) =>
    (
      await svc.service.deps.db.query<{ kind: string; target: string; payload: Record<string, unknown> }>(
        'SELECT kind, target, payload FROM deliveries WHERE task_id = $1 AND run_id IS NULL',
        [taskId],
      )
    ).map((n) => ({
      kind: n.kind,
      target: n.target,
      limitCents: n.payload.limitCents,
      costCents: n.payload.costCents,
    }));
  const finishRunsOf = (taskId: string, costCents = 0) =>
    svc.service.deps.db.query(
      `WITH r AS (UPDATE runs SET status = 'completed', completed_at = $2
                   WHERE task_id = $1 AND status IN ('pending', 'running') RETURNING id)
       UPDATE usage_ledger u SET status = 'completed', cost_cents = u.cost_cents + $3 FROM r WHERE u.run_id = r.id`,
      [taskId, clock.now(), costCents],
    );

  before(async () => {
    svc = await startTestService({ clock });
    const s = svc.service.scheduler;
    if (!s) throw new Error('no scheduler role');
    scheduler = s;
    org = await svc.createOrg('paid');
    await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${org.organizationId}`,
      admin: true,
      body: { tasksLimit: 1000 },
    });
  });
  after(() => svc.close());
  afterEach(() => svc.service.deps.db.query('DELETE FROM tasks'));

  test('each slot passed has one record, newest first: ran with its run, skipped_overlap with why', async () => {
    clock.set('2027-05-03T10:20:00Z');
    const task = await createTask({ schedule: 'hourly', timezone: 'UTC' });
    assert.deepEqual(await slotsOf(task.id), [], 'nothing recorded before the first slot');
    clock.set('2027-05-03T11:00:00Z');
    await scheduler.tick();
    clock.set('2027-05-03T12:00:00Z');
    await scheduler.tick(); // the 11:00 run is still pending
    const [overlap, ran] = await slotsOf(task.id);
    assert.deepEqual(overlap, {
      slotAt: '2027-05-03T12:00:00.000Z',
      outcome: 'skipped_overlap',
      reason: 'the previous run of the task was still pending or running',
    });
    assert.equal(ran?.outcome, 'ran');
    assert.equal(ran?.slotAt, '2027-05-03T11:00:00.000Z');
    const [run] = await svc.service.deps.db.query<{ id: string }>('SELECT id FROM runs WHERE task_id = $1', [
      task.id,
    ]);
    assert.equal(ran?.runId, run?.id);
    assert.equal((await slotsOf(task.id, '?limit=1')).length, 1);
  });

  test('an outage records each missed slot, the oldest of a long one folded into one record', async () => {
    clock.set('2027-05-03T10:20:00Z');
    const task = await createTask({ cronExpression: '* * * * *', timezone: 'UTC' });
    // Three hours down: 180 passed slots, the last one runs late, the 179 before are missed.
    clock.set('2027-05-03T13:21:00Z');
    const result = await scheduler.tick();
    assert.equal(result.runsCreated, 1);
    assert.equal(result.missed, 180);
    const records = await slotsOf(task.id, '?limit=100');
    assert.equal(records[0]?.outcome, 'ran');
    assert.equal(records[0]?.slotAt, '2027-05-03T13:21:00.000Z');
    const all = await svc.service.deps.db.query<{ outcome: string; slots: number; slot_at: Date }>(
      'SELECT outcome, slots, slot_at FROM task_slots WHERE task_id = $1 ORDER BY slot_at',
      [task.id],
    );
    assert.equal(
      all.length,
      MISSED_RECORDS_PER_CLAIM + 2,
      'the bound: 100 missed one by one, one folded, the run',
    );
    const folded = all[0];
    assert.equal(folded?.outcome, 'missed');
    assert.equal(folded?.slots, 180 - MISSED_RECORDS_PER_CLAIM);
    assert.equal(folded?.slot_at.toISOString(), '2027-05-03T10:21:00.000Z');
    assert.equal(
      all.reduce((n, r) => n + r.slots, 0),
      181,
      'the records add up to the slots',
    );
    const oldest = (await slotsOf(task.id, '?limit=100')).at(-1);
    assert.equal(oldest?.outcome, 'missed');
    assert.match(oldest?.reason ?? '', /older than the catch-up window|a later slot had passed too/);
  });

  test('a task holds at most 500 records: a claim past the bound prunes it to its newest 400, and its records go when it is deleted', async () => {
    clock.set('2027-05-03T10:20:00Z');
    const task = await createTask({ schedule: 'hourly', timezone: 'UTC' });
    // A long history already recorded, all before the task's next slot: one short of the bound.
    const history = SLOT_RECORDS_PER_TASK - 1;
    await svc.service.deps.db.query(
      `INSERT INTO task_slots (task_id, slot_at, outcome, recorded_at)
       SELECT $1, $2::timestamptz - make_interval(hours => i), 'missed', now() FROM generate_series(1, $3) AS i`,
      [task.id, new Date('2027-05-03T10:00:00Z'), history],
    );
    await svc.service.deps.db.query('UPDATE tasks SET slot_records = $2 WHERE id = $1', [task.id, history]);
    const held = async () =>
      (
        await svc.service.deps.db.query<{ n: number; oldest: Date; counted: number }>(
          `SELECT count(*)::int AS n, min(slot_at) AS oldest,
                  (SELECT slot_records FROM tasks WHERE id = $1) AS counted
             FROM task_slots WHERE task_id = $1`,
          [task.id],
        )
      )[0];
    clock.set('2027-05-03T11:00:00Z');
    await scheduler.tick();
    await finishRunsOf(task.id);
    assert.equal((await held())?.n, SLOT_RECORDS_PER_TASK, 'at the bound: nothing pruned');
    clock.set('2027-05-03T12:00:00Z');
    await scheduler.tick();
    const after = await held();
    assert.equal(after?.n, SLOT_RECORDS_PRUNED_TO, 'past it: pruned');
    assert.equal(after?.counted, SLOT_RECORDS_PRUNED_TO);
    // The newest kept: the two new records and the newest 398 of the history.
    assert.equal(
      after?.oldest.toISOString(),
      new Date(Date.parse('2027-05-03T10:00:00Z') - (SLOT_RECORDS_PRUNED_TO - 2) * 3_600_000).toISOString(),
    );
    assert.deepEqual(
      (await slotsOf(task.id, '?limit=2')).map((r) => r.outcome),
      ['ran', 'ran'],
    );
    assert.equal((await call('DELETE', `/api/svc/tasks/${task.id}`)).status, 204);
    const left = await svc.service.deps.db.query('SELECT 1 FROM task_slots WHERE task_id = $1', [task.id]);
    assert.equal(left.length, 0);
  });

  test("another organization's task is a 404, and limit is bounded 1-100", async () => {
    clock.set('2027-05-03T10:20:00Z');
    const task = await createTask({ schedule: 'daily' });
    const other = await svc.createOrg('paid');
    for (const path of ['slots', 'upcoming']) {
      const res = await call('GET', `/api/svc/tasks/${task.id}/${path}`, undefined, other);
      assert.equal(res.status, 404, res.raw);
      assert.equal(res.body.error.code, 'not_found');
    }
    for (const q of ['?limit=0', '?limit=101', '?limit=x']) {
      const res = await call('GET', `/api/svc/tasks/${task.id}/slots${q}`);
      assert.equal(res.status, 400, `${q}: ${res.raw}`);
    }
    for (const q of ['?count=0', '?count=101']) {
      const res = await call('GET', `/api/svc/tasks/${task.id}/upcoming${q}`);
      assert.equal(res.status, 400, `${q}: ${res.raw}`);
    }
  });

  test('upcoming slots give local times with offsets and say where the DST rule moved or chose a slot', async () => {
    clock.set('2026-03-27T12:00:00Z');
    const task = await createTask({ schedule: 'daily', scheduleTime: '02:30', timezone: 'Europe/Berlin' });
    const res = await call('GET', `/api/svc/tasks/${task.id}/upcoming?count=3`);
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body, [
      { at: '2026-03-28T01:30:00.000Z', localTime: '2026-03-28T02:30:00+01:00' },
      {
        at: '2026-03-29T01:00:00.000Z',
        localTime: '2026-03-29T03:00:00+02:00',
        note: '02:30 does not exist on 2026-03-29 in Europe/Berlin (the clocks go forward): runs at 03:00, the first moment after the gap',
      },
      { at: '2026-03-30T00:30:00.000Z', localTime: '2026-03-30T02:30:00+02:00' },
    ]);
    assert.equal((await call('GET', `/api/svc/tasks/${task.id}/upcoming`)).body.length, 5, 'five by default');
    assert.equal((await call('PATCH', `/api/svc/tasks/${task.id}`, { status: 'paused' })).status, 200);
    assert.deepEqual((await call('GET', `/api/svc/tasks/${task.id}/upcoming`)).body, [], 'paused: none');
  });

  test('the preview gives the slots a task would get, with the fall-back note, and validates as a task does', async () => {
    clock.set('2026-10-24T12:00:00Z');
    const body = {
      organizationId: org.organizationId,
      schedule: 'daily',
      scheduleTime: '02:30',
      timezone: 'Europe/Berlin',
    };
    const res = await call('POST', '/api/svc/schedules/preview', { ...body, count: 2 });
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body, [
      {
        at: '2026-10-25T00:30:00.000Z',
        localTime: '2026-10-25T02:30:00+02:00',
        note: '02:30 occurs twice on 2026-10-25 in Europe/Berlin (the clocks go back): runs once, at the first',
      },
      { at: '2026-10-26T01:30:00.000Z', localTime: '2026-10-26T02:30:00+01:00' },
    ]);
    // A `once` task at a time that occurs twice that day: the note too.
    const onceAt = await call('POST', '/api/svc/schedules/preview', { ...body, schedule: 'once' });
    assert.equal(onceAt.body.length, 1);
    assert.match(onceAt.body[0].note, /occurs twice/);
    // A `once` task without a time runs as soon as it is created.
    const once = await call('POST', '/api/svc/schedules/preview', { organizationId: org.organizationId });
    assert.deepEqual(once.body, [{ at: '2026-10-24T12:00:00.000Z', localTime: '2026-10-24T12:00:00+00:00' }]);

    // The same 400s as a task's create, field for field.
    for (const bad of [
      { timezone: 'Mars/Olympus' },
      { cronExpression: '61 * * * *' },
      { scheduleTime: '25:00' },
      { schedule: 'yearly' },
      { timezone: 'Mars/Olympus', cronExpression: '* * * *' },
    ]) {
      const preview = await call('POST', '/api/svc/schedules/preview', {
        organizationId: org.organizationId,
        ...bad,
      });
      const create = await call('POST', '/api/svc/tasks', {
        organizationId: org.organizationId,
        name: 'x',
        prompt: 'x',
        ...bad,
      });
      assert.equal(preview.status, 400, preview.raw);
      assert.equal(create.status, 400, create.raw);
      assert.deepEqual(preview.body.error.details, create.body.error.details, JSON.stringify(bad));
    }
    const tooMany = await call('POST', '/api/svc/schedules/preview', { ...body, count: 101 });
    assert.equal(tooMany.status, 400);
    const other = await svc.createOrg('paid');
    const foreign = await call('POST', '/api/svc/schedules/preview', body, other);
    assert.equal(foreign.status, 401, "organizationId must be the key's, as in every body");
  });

  test('the monthly cost limit: set, cleared with null, bounded, and absent by default', async () => {
    clock.set('2027-05-03T10:20:00Z');
    const plain = await createTask({ schedule: 'daily' });
    assert.equal(plain.monthlyCostLimitCents, undefined);
    const limited = await createTask({ schedule: 'daily', monthlyCostLimitCents: 250 });
    assert.equal(limited.monthlyCostLimitCents, 250);
    const patched = await call('PATCH', `/api/svc/tasks/${limited.id}`, { monthlyCostLimitCents: 99.5 });
    assert.equal(patched.body.monthlyCostLimitCents, 99.5);
    const cleared = await call('PATCH', `/api/svc/tasks/${limited.id}`, { monthlyCostLimitCents: null });
    assert.equal(cleared.status, 200, cleared.raw);
    assert.equal(cleared.body.monthlyCostLimitCents, undefined);
    for (const bad of [-1, 100_000_001, '5']) {
      const res = await call('PATCH', `/api/svc/tasks/${limited.id}`, { monthlyCostLimitCents: bad });
      assert.equal(res.status, 400, res.raw);
      assert.equal(res.body.error.details[0].path, '/body/monthlyCostLimitCents');
    }
  });

  test('at its cost limit a task skips its slots (skipped_budget), Run now is a 409, it is told once per period, and a raised limit runs again', async () => {
    clock.set('2027-05-03T10:20:00Z');
    const task = await createTask({
      schedule: 'hourly',
      timezone: 'UTC',
      monthlyCostLimitCents: 100,
      destinations: [{ type: 'email', value: 'ops@example.com' }],
    });
    clock.set('2027-05-03T11:00:00Z');
    assert.equal((await scheduler.tick()).runsCreated, 1, 'under the limit: a run');
    await finishRunsOf(task.id, 100);
    const told = () =>
      svc.logs.filter((l) => l.includes('task reached its monthly cost limit') && l.includes(task.id)).length;

    clock.set('2027-05-03T12:00:00Z');
    const skipped = await scheduler.tick();
    assert.equal(skipped.runsCreated, 0);
    assert.equal(skipped.skippedBudget, 1);
    const [record] = await slotsOf(task.id);
    assert.deepEqual(record, {
      slotAt: '2027-05-03T12:00:00.000Z',
      outcome: 'skipped_budget',
      reason: "the task's cost in this billing period (100 cents) reached its monthly cost limit (100 cents)",
    });
    assert.equal(told(), 1);

    const now = await call('POST', `/api/svc/tasks/${task.id}/run`);
    assert.equal(now.status, 409, now.raw);
    assert.equal(now.body.error.code, 'conflict');
    assert.match(now.body.error.message, /monthly cost limit of 100 cents was reached/);
    clock.set('2027-05-03T13:00:00Z');
    await scheduler.tick();
    assert.equal(told(), 1, 'told once per period');
    // The destination's one notice, queued with the first refusal.
    const notices = await noticesOf(task.id);
    assert.equal(notices.length, 1);
    assert.deepEqual(notices[0], {
      kind: 'task.cost_limit_reached',
      target: 'ops@example.com',
      limitCents: 100,
      costCents: 100,
    });
    const metrics = (await svc.call({ method: 'GET', url: '/metrics' })).raw;
    assert.match(metrics, /svc_scheduler_slots_total\{outcome="skipped_budget"\} [1-9]/);

    // Raising the limit lets the next slot run; the org's next period starts from zero anyway.
    assert.equal(
      (await call('PATCH', `/api/svc/tasks/${task.id}`, { monthlyCostLimitCents: 500 })).status,
      200,
    );
    const [{ next }] = (await svc.service.deps.db.query<{ next: Date }>(
      'SELECT next_run_at AS next FROM tasks WHERE id = $1',
      [task.id],
    )) as [{ next: Date }];
    clock.set(next.toISOString());
    assert.equal((await scheduler.tick()).runsCreated, 1, 'under the raised limit: a run');
    const outcomes = (await slotsOf(task.id)).map((r) => r.outcome);
    assert.deepEqual(outcomes, ['ran', 'skipped_budget', 'skipped_budget', 'ran']);
  });

  test('a new billing period lifts the cost limit', async () => {
    const [anchor] = await svc.service.deps.db.query<{ start: Date }>(
      'SELECT billing_period_start AS start FROM organizations WHERE id = $1',
      [org.organizationId],
    );
    assert.ok(anchor);
    // A day before the period ends (periods run monthly from the anchor).
    const { currentPeriodEnd } = await import('../src/domain/billing-period.ts');
    const end = currentPeriodEnd(anchor.start, new Date('2027-05-03T10:20:00Z'));
    clock.set(new Date(end.getTime() - 3 * 3_600_000 - 60_000).toISOString());
    const task = await createTask({ schedule: 'hourly', timezone: 'UTC', monthlyCostLimitCents: 10 });
    clock.set(task.nextRunAt ?? '');
    assert.equal((await scheduler.tick()).runsCreated, 1);
    await finishRunsOf(task.id, 10);
    clock.set(new Date(Date.parse(task.nextRunAt ?? '') + 3_600_000).toISOString());
    assert.equal((await scheduler.tick()).skippedBudget, 1);
    // Past the period's end: the task's cost in the new period is zero.
    clock.set(new Date(Math.ceil((end.getTime() + 1) / 3_600_000) * 3_600_000).toISOString());
    const result = await scheduler.tick();
    assert.equal(result.runsCreated, 1, JSON.stringify(result));
  });

  test('several schedulers and Run now calls at once: no run for a task at its limit, each told exactly once', async () => {
    clock.set('2027-05-03T10:20:00Z');
    const tasks = [];
    for (let i = 0; i < 12; i++) {
      tasks.push(
        await createTask({
          schedule: 'hourly',
          timezone: 'UTC',
          monthlyCostLimitCents: 5,
          destinations: [{ type: 'email', value: 'ops@example.com' }],
        }),
      );
    }
    // Each has spent its limit already this period: one finished run costing 5 cents.
    clock.set('2027-05-03T11:00:00Z');
    await Promise.all(tasks.map((t) => call('POST', `/api/svc/tasks/${t.id}/run`)));
    for (const t of tasks) await finishRunsOf(t.id, 5);
    const before = (await svc.service.deps.db.query<{ n: number }>('SELECT count(*)::int AS n FROM runs'))[0]
      ?.n;
    const schedulers = Array.from({ length: 3 }, () => new DueTaskClaimer(svc.service.deps));
    const [ticks, answers] = await Promise.all([
      Promise.all(schedulers.map((s) => s.tick())),
      Promise.all(tasks.map((t) => call('POST', `/api/svc/tasks/${t.id}/run`))),
    ]);
    assert.ok(answers.every((a) => a.status === 409 && a.body.error.code === 'conflict'));
    assert.equal(
      ticks.reduce((n, t) => n + t.skippedBudget, 0),
      tasks.length,
    );
    const after = (await svc.service.deps.db.query<{ n: number }>('SELECT count(*)::int AS n FROM runs'))[0]
      ?.n;
    assert.equal(after, before, 'no run created');
    for (const t of tasks) {
      const lines = svc.logs.filter(
        (l) => l.includes('task reached its monthly cost limit') && l.includes(t.id),
      );
      assert.equal(lines.length, 1, `${t.id} told once`);
      assert.equal((await noticesOf(t.id)).length, 1, `${t.id}: one notice for its destination`);
      assert.deepEqual(
        (await slotsOf(t.id)).map((r) => r.outcome),
        ['skipped_budget'],
      );
    }
  });
});
