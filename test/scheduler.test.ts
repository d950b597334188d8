import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { ManualClock } from '../src/lib/clock.ts';
import type { DueTaskClaimer, TickResult } from '../src/scheduler/claimer.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { assertRunsMatchRecords, recordedOutcomes, totalsOfTicks } from './helpers/slot-records.ts';

const HOUR = 3_600_000;

/**
 * The due-task claimer, driven tick by tick on a manual clock: time is moved, never waited for.
 * The catch-up window is the default hour unless a test says otherwise.
 */
describe('the scheduler (due-task claimer)', () => {
  // A Monday, 10:20 UTC.
  const clock = new ManualClock('2027-05-03T10:20:00Z');
  let svc: TestService;
  let scheduler: DueTaskClaimer;
  let org: { organizationId: string; apiKey: string };
  const ticks: TickResult[] = [];

  const createTask = async (extra: Record<string, unknown>) => {
    const res = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: org.apiKey,
      body: { organizationId: org.organizationId, name: 'Report', prompt: 'Write the report', ...extra },
    });
    assert.equal(res.status, 201, res.raw);
    return res.body as { id: string; nextRunAt: string | null; status: string };
  };
  const getTask = async (id: string) =>
    (await svc.call({ method: 'GET', url: `/api/svc/tasks/${id}`, key: org.apiKey })).body;
  const slotsOf = async (taskId: string) =>
    (
      await svc.service.deps.db.query<{ slot_at: Date; status: string }>(
        'SELECT slot_at, status FROM runs WHERE task_id = $1 ORDER BY slot_at',
        [taskId],
      )
    ).map((r) => r.slot_at.toISOString());
  const finishRunsOf = (taskId: string) =>
    svc.service.deps.db.query(
      `UPDATE runs SET status = 'completed', completed_at = $2 WHERE task_id = $1 AND status IN ('pending', 'running')`,
      [taskId, clock.now()],
    );

  before(async () => {
    svc = await startTestService({ clock });
    const s = svc.service.scheduler;
    if (!s) throw new Error('no scheduler role');
    scheduler = s;
    // Every tick is counted (the tests' and the scheduler loop's own), so that each test can
    // check that every slot the scheduler passed has exactly one record.
    const tick = s.tick.bind(s);
    s.tick = async () => {
      const result = await tick();
      ticks.push(result);
      return result;
    };
    org = await svc.createOrg('paid');
    // Enough room for every task of this file.
    await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${org.organizationId}`,
      admin: true,
      body: { tasksLimit: 1000 },
    });
  });
  after(() => svc.close());
  // Ticks look at every task: each test starts with none left from the one before.
  afterEach(async () => {
    const rows = <T>(sql: string, params?: unknown[]) => svc.service.deps.db.query<T>(sql, params);
    assert.deepEqual(
      await recordedOutcomes(rows, null),
      totalsOfTicks(ticks),
      'the records add up to the slots',
    );
    await assertRunsMatchRecords(rows, null);
    ticks.length = 0;
    await svc.service.deps.db.query('DELETE FROM tasks');
    assert.deepEqual(await rows('SELECT task_id FROM task_slots'), [], "a task's records go with it");
  });

  test('a due daily task gets one run for its slot and moves to the next day', async () => {
    clock.set('2027-05-03T10:20:00Z');
    const task = await createTask({ schedule: 'daily', scheduleTime: '12:00', timezone: 'Europe/Berlin' });
    assert.equal(task.nextRunAt, '2027-05-04T10:00:00.000Z');

    clock.set('2027-05-04T09:59:59Z');
    assert.equal((await scheduler.tick()).runsCreated, 0, 'nothing before the slot');
    const runsCounted = async () =>
      (await svc.service.deps.metrics.schedulerSlots.get()).values.find((v) => v.labels.outcome === 'run')
        ?.value ?? 0;
    const countedBefore = await runsCounted();
    clock.set('2027-05-04T10:00:00Z');
    assert.equal((await scheduler.tick()).runsCreated, 1);
    assert.equal((await scheduler.tick()).runsCreated, 0, 'a slot runs once');
    assert.deepEqual(await slotsOf(task.id), ['2027-05-04T10:00:00.000Z']);
    assert.equal(await runsCounted(), countedBefore + 1, 'svc_scheduler_slots_total{outcome="run"}');
    // The run's line, as pino writes a line: level, time, pid, hostname, the members, msg.
    const [run] = await svc.service.deps.db.query<{ id: string }>('SELECT id FROM runs WHERE task_id = $1', [
      task.id,
    ]);
    const lines = svc.logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'run created for schedule slot' && l.taskId === task.id);
    assert.equal(lines.length, 1);
    assert.deepEqual(Object.keys(lines[0] ?? {}), [
      'level',
      'time',
      'pid',
      'hostname',
      'taskId',
      'organizationId',
      'runId',
      'slot',
      'msg',
    ]);
    assert.deepEqual(
      { ...lines[0], time: 0 },
      {
        level: 30,
        time: 0,
        pid: process.pid,
        hostname: lines[0]?.hostname,
        taskId: task.id,
        organizationId: org.organizationId,
        runId: run?.id,
        slot: '2027-05-04T10:00:00.000Z',
        msg: 'run created for schedule slot',
      },
    );

    const after = await getTask(task.id);
    assert.equal(after.nextRunAt, '2027-05-05T10:00:00.000Z');
    assert.equal(after.lastRunAt, '2027-05-04T10:00:00.000Z');
    await finishRunsOf(task.id);
  });

  test('after three missed hourly slots, one catch-up run for the most recent slot, none for the others', async () => {
    clock.set('2027-05-10T08:30:00Z');
    const task = await createTask({ schedule: 'hourly' });
    assert.equal(task.nextRunAt, '2027-05-10T09:00:00.000Z');

    // "Down" from 08:30 to 11:40: the 09:00, 10:00 and 11:00 slots passed without a scheduler.
    clock.set('2027-05-10T11:40:00Z');
    const result = await scheduler.tick();
    assert.equal(result.runsCreated, 1);
    assert.equal(result.missed, 2);
    assert.deepEqual(await slotsOf(task.id), ['2027-05-10T11:00:00.000Z']);
    assert.equal((await getTask(task.id)).nextRunAt, '2027-05-10T12:00:00.000Z');
    await finishRunsOf(task.id);
  });

  test('a missed slot older than the catch-up window gets no run, and the schedule goes on', async () => {
    clock.set('2027-05-11T06:00:00Z');
    const task = await createTask({ schedule: 'daily', scheduleTime: '07:00' });
    // Down until 08:30: the 07:00 slot is 90 minutes old, outside the one-hour window.
    clock.set('2027-05-11T08:30:00Z');
    const result = await scheduler.tick();
    assert.equal(result.runsCreated, 0);
    assert.equal(result.missed, 1);
    assert.deepEqual(await slotsOf(task.id), []);
    assert.equal((await getTask(task.id)).nextRunAt, '2027-05-12T07:00:00.000Z');
  });

  test('the dispatch lag runs from the slot to the commit of the run, not to the start of its batch', async () => {
    clock.set('2027-05-12T06:10:00Z');
    const task = await createTask({ schedule: 'hourly' });
    const lagSum = async () => {
      const raw = (await svc.call({ method: 'GET', url: '/metrics' })).raw;
      const sum = /^svc_scheduler_dispatch_lag_seconds_sum (\S+)$/m.exec(raw)?.[1];
      const count = /^svc_scheduler_dispatch_lag_seconds_count (\S+)$/m.exec(raw)?.[1];
      return { sum: Number(sum ?? 0), count: Number(count ?? 0) };
    };
    const before = await lagSum();
    // The batch reads its "now" 5 s after the slot; its statements and commit then take 30 s.
    clock.set('2027-05-12T07:00:05Z');
    let slow = true;
    clock.agreedNow = async () => {
      const now = clock.now();
      if (slow) clock.advance(30_000);
      slow = false;
      return now;
    };
    try {
      assert.equal((await scheduler.tick()).runsCreated, 1);
    } finally {
      // Back to ManualClock's own method.
      Reflect.deleteProperty(clock, 'agreedNow');
    }
    const after = await lagSum();
    assert.equal(after.count - before.count, 1);
    assert.equal(Math.round((after.sum - before.sum) * 1000), 35_000);
    await finishRunsOf(task.id);
  });

  test('a slot whose previous run is still pending is skipped, counted and logged', async () => {
    clock.set('2027-05-12T06:10:00Z');
    const task = await createTask({ schedule: 'hourly' });
    clock.set('2027-05-12T07:00:05Z');
    assert.equal((await scheduler.tick()).runsCreated, 1);
    // The 07:00 run is still pending at 08:00.
    clock.set('2027-05-12T08:00:01Z');
    const result = await scheduler.tick();
    assert.equal(result.runsCreated, 0);
    assert.equal(result.skippedOverlap, 1);
    assert.deepEqual(await slotsOf(task.id), ['2027-05-12T07:00:00.000Z']);
    assert.equal((await getTask(task.id)).nextRunAt, '2027-05-12T09:00:00.000Z');

    const metrics = await svc.call({ method: 'GET', url: '/metrics' });
    assert.match(metrics.raw, /svc_scheduler_slots_total\{outcome="skipped_overlap"\} [1-9]/);
    assert.ok(
      svc.logs.some((l) => l.includes('schedule slot skipped') && l.includes(task.id)),
      'the skip is logged with the task id',
    );
    await finishRunsOf(task.id);
  });

  test('a once task gets a single run and then no further slot', async () => {
    clock.set('2027-05-13T10:00:00Z');
    const task = await createTask({ schedule: 'once' });
    assert.equal(task.nextRunAt, '2027-05-13T10:00:00.000Z', 'as soon as possible');
    assert.equal((await scheduler.tick()).runsCreated, 1);
    const after = await getTask(task.id);
    assert.equal(after.nextRunAt, null);
    assert.equal(after.status, 'active', 'completed only when its run ends');
    clock.advance(HOUR);
    assert.equal((await scheduler.tick()).runsCreated, 0);
    await finishRunsOf(task.id);
  });

  test('a once task whose only slot was missed completes without a run', async () => {
    clock.set('2027-05-14T10:00:00Z');
    const task = await createTask({ schedule: 'once', scheduleTime: '11:00' });
    clock.set('2027-05-14T13:00:00Z');
    const result = await scheduler.tick();
    assert.equal(result.runsCreated, 0);
    assert.equal(result.missed, 1);
    const after = await getTask(task.id);
    assert.equal(after.status, 'completed');
    assert.equal(after.nextRunAt, null);
  });

  test('a paused task gets no run; resumed, it runs from its next slot after now', async () => {
    clock.set('2027-05-15T10:10:00Z');
    const task = await createTask({ schedule: 'hourly' });
    await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${task.id}`,
      key: org.apiKey,
      body: { status: 'paused' },
    });
    clock.set('2027-05-15T13:30:00Z');
    assert.equal((await scheduler.tick()).runsCreated, 0);
    const resumed = await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${task.id}`,
      key: org.apiKey,
      body: { status: 'active' },
    });
    assert.equal(resumed.body.nextRunAt, '2027-05-15T14:00:00.000Z', 'no catch-up of paused time');
    assert.equal((await scheduler.tick()).runsCreated, 0);
    assert.deepEqual(await slotsOf(task.id), []);
  });

  test('a spring-forward slot runs once, at the first instant after the gap', async () => {
    // Europe/Berlin skips 02:00-03:00 on 2027-03-28; a daily 02:30 runs at 03:00 local (01:00Z).
    clock.set('2027-03-27T12:00:00Z');
    const task = await createTask({ schedule: 'daily', scheduleTime: '02:30', timezone: 'Europe/Berlin' });
    assert.equal(task.nextRunAt, '2027-03-28T01:00:00.000Z');
    clock.set('2027-03-28T01:00:00Z');
    assert.equal((await scheduler.tick()).runsCreated, 1);
    assert.equal((await getTask(task.id)).nextRunAt, '2027-03-29T00:30:00.000Z');
    await finishRunsOf(task.id);
  });

  test('two schedulers ticking at once create one run per slot', async () => {
    clock.set('2027-05-16T08:00:00Z');
    const tasks = [];
    for (let i = 0; i < 20; i++) tasks.push(await createTask({ schedule: 'daily', scheduleTime: '09:00' }));
    clock.set('2027-05-16T09:00:00Z');
    const [a, b] = await Promise.all([scheduler.tick(), scheduler.tick()]);
    assert.equal((a?.runsCreated ?? 0) + (b?.runsCreated ?? 0), 20);
    for (const t of tasks) assert.deepEqual(await slotsOf(t.id), ['2027-05-16T09:00:00.000Z']);
  });
});
