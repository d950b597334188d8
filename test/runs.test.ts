import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Queryable } from '../src/db/db.ts';
import { insertRun } from '../src/db/sql/runs.ts';
import { insertSlotRuns } from '../src/db/sql/scheduler.ts';
import { recordRunOutcome } from './helpers/fixtures.ts';
import { startTestService, type TestService } from './helpers/service.ts';

async function insertTask(
  db: Queryable,
  organizationId: string,
  options: { status?: 'active' | 'paused' | 'completed'; createdAt?: Date } = {},
): Promise<string> {
  const id = randomUUID();
  const at = options.createdAt ?? new Date();
  await db.query(
    `INSERT INTO tasks (id, organization_id, name, prompt, model, schedule, status, created_at, updated_at)
     VALUES ($1, $2, 'A task', 'Say hello', 'openai/gpt-4o-mini', 'daily', $3, $4, $4)`,
    [id, organizationId, options.status ?? 'active', at],
  );
  return id;
}

const BASE = Date.parse('2026-01-05T10:00:00.000Z');

describe('runs', () => {
  let svc: TestService;
  let db: Queryable;
  let org: { organizationId: string; apiKey: string };
  let other: { organizationId: string; apiKey: string };
  let taskA: string;
  let taskB: string;
  let otherTask: string;
  let otherRun: string;
  /** Run ids of the organization, oldest first. */
  const runIds: string[] = [];

  const get = (url: string, key = org.apiKey) => svc.call({ method: 'GET', url, key });
  const runsUrl = (limit?: string) =>
    `/api/svc/runs?organizationId=${org.organizationId}${limit === undefined ? '' : `&limit=${limit}`}`;

  before(async () => {
    svc = await startTestService();
    db = svc.testDb.db;
    org = await svc.createOrg();
    other = await svc.createOrg();
    taskA = await insertTask(db, org.organizationId);
    taskB = await insertTask(db, org.organizationId);
    otherTask = await insertTask(db, other.organizationId);
    // 25 runs, one second apart, alternating between the two tasks.
    for (let i = 0; i < 25; i++) {
      const run = await insertRun(db, {
        id: randomUUID(),
        organizationId: org.organizationId,
        taskId: i % 2 === 0 ? taskA : taskB,
        slotAt: null,
        trigger: 'manual',
        now: new Date(BASE + i * 1000),
      });
      runIds.push(run.id);
    }
    otherRun = (
      await insertRun(db, {
        id: randomUUID(),
        organizationId: other.organizationId,
        taskId: otherTask,
        slotAt: null,
        trigger: 'manual',
        now: new Date(BASE + 60_000),
      })
    ).id;
  });
  after(() => svc.close());

  test('the organization runs list is newest first and returns 20 by default', async () => {
    const res = await get(runsUrl());
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.length, 20);
    assert.deepEqual(
      res.body.map((r: any) => r.id),
      [...runIds].reverse().slice(0, 20),
    );
  });

  test('a limit of 100 is accepted and returns every run of the organization, no other', async () => {
    const res = await get(runsUrl('100'));
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.length, 25);
    assert.ok(!res.body.some((r: any) => r.id === otherRun));
  });

  test('a smaller limit returns that many runs', async () => {
    const res = await get(runsUrl('3'));
    assert.deepEqual(
      res.body.map((r: any) => r.id),
      [...runIds].reverse().slice(0, 3),
    );
  });

  for (const bad of ['101', '0', 'abc', '2.5']) {
    test(`a limit of ${bad} is a 400 naming /query/limit`, async () => {
      const res = await get(runsUrl(bad));
      assert.equal(res.status, 400, res.raw);
      assert.equal(res.body.error.code, 'validation_error');
      assert.equal(res.body.error.details[0].path, '/query/limit');
    });
  }

  test('the runs list without organizationId is a 400', async () => {
    const res = await get('/api/svc/runs');
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_error');
  });

  test("the runs list for another organization's id is refused with 401", async () => {
    const res = await get(`/api/svc/runs?organizationId=${other.organizationId}`);
    assert.equal(res.status, 401);
  });

  test('a pending run shows its set fields and omits the empty ones', async () => {
    const res = await get(`/api/svc/runs/${runIds[0]}`);
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body, {
      id: runIds[0],
      taskId: taskA,
      status: 'pending',
      costCents: 0,
      tokensUsed: 0,
      createdAt: new Date(BASE).toISOString(),
      trigger: 'manual',
    });
  });

  test('a finished run shows output, cost, tokens, duration, delivery status and times', async () => {
    const id = runIds[1] ?? '';
    await db.query(
      `UPDATE runs SET status = 'completed', delivery_status = 'delivered', output = 'Hello',
         cost_cents = 1.25, tokens_used = 321, duration_ms = 1500, started_at = $2, completed_at = $3
       WHERE id = $1`,
      [id, new Date(BASE + 2000), new Date(BASE + 3500)],
    );
    const res = await get(`/api/svc/runs/${id}`);
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body, {
      id,
      taskId: taskB,
      status: 'completed',
      deliveryStatus: 'delivered',
      output: 'Hello',
      costCents: 1.25,
      tokensUsed: 321,
      durationMs: 1500,
      createdAt: new Date(BASE + 1000).toISOString(),
      startedAt: new Date(BASE + 2000).toISOString(),
      completedAt: new Date(BASE + 3500).toISOString(),
      trigger: 'manual',
    });
  });

  test('a failed run carries its error message', async () => {
    const id = runIds[2] ?? '';
    await db.query(`UPDATE runs SET status = 'failed', error = 'model timed out' WHERE id = $1`, [id]);
    const res = await get(`/api/svc/runs/${id}`);
    assert.equal(res.body.status, 'failed');
    assert.equal(res.body.error, 'model timed out');
  });

  test("another organization's run is a 404 like an unknown one", async () => {
    const theirs = await get(`/api/svc/runs/${otherRun}`);
    const unknown = await get(`/api/svc/runs/${randomUUID()}`);
    assert.equal(theirs.status, 404);
    assert.deepEqual(theirs.body, unknown.body);
    assert.deepEqual(theirs.body, { error: { code: 'not_found', message: 'Run not found' } });
  });

  test('a run id that is not a uuid is a 400', async () => {
    const res = await get('/api/svc/runs/nope');
    assert.equal(res.status, 400);
    assert.equal(res.body.error.details[0].path, '/path/runId');
  });

  test("a task's runs list has only that task's runs, newest first", async () => {
    const res = await get(`/api/svc/tasks/${taskA}/runs`);
    assert.equal(res.status, 200, res.raw);
    const expected = runIds.filter((_, i) => i % 2 === 0).reverse();
    assert.equal(res.body.length, 13);
    assert.deepEqual(
      res.body.map((r: any) => r.id),
      expected,
    );
    assert.ok(res.body.every((r: any) => r.taskId === taskA));
  });

  test("a task's runs list honours limit and refuses 101", async () => {
    const limited = await get(`/api/svc/tasks/${taskB}/runs?limit=5`);
    assert.equal(limited.body.length, 5);
    const bad = await get(`/api/svc/tasks/${taskB}/runs?limit=101`);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.details[0].path, '/query/limit');
  });

  test("a task's runs list refuses unknown query parameters", async () => {
    const res = await get(`/api/svc/tasks/${taskB}/runs?page=2`);
    assert.equal(res.status, 400);
  });

  test("another organization's task, and an unknown task, answer 404 for the runs list", async () => {
    const theirs = await get(`/api/svc/tasks/${otherTask}/runs`);
    const unknown = await get(`/api/svc/tasks/${randomUUID()}/runs`);
    assert.equal(theirs.status, 404);
    assert.deepEqual(theirs.body, unknown.body);
    assert.equal(theirs.body.error.code, 'not_found');
  });

  test('a new run is written together with its pending usage-ledger row', async () => {
    const run = await insertRun(db, {
      id: randomUUID(),
      organizationId: org.organizationId,
      taskId: taskA,
      slotAt: new Date(BASE),
      trigger: 'schedule',
      now: new Date(BASE - 3_600_000),
    });
    assert.equal(run.status, 'pending');
    assert.equal(run.trigger, 'schedule');
    assert.equal(run.slot_at?.toISOString(), new Date(BASE).toISOString());
    const ledger = await db.query<{ status: string; task_id: string; organization_id: string }>(
      'SELECT status, task_id, organization_id FROM usage_ledger WHERE run_id = $1',
      [run.id],
    );
    assert.deepEqual(ledger, [{ status: 'pending', task_id: taskA, organization_id: org.organizationId }]);
  });

  test('a scheduled slot gets one run: none while the task has a run in flight, none for a slot already taken', async () => {
    const slotAt = new Date(BASE + 86_400_000);
    const now = new Date(BASE - 7_200_000);
    const task = await insertTask(db, org.organizationId);
    const slot = (runId: string) => [{ taskId: task, organizationId: org.organizationId, runId, slotAt }];
    const first = (await insertSlotRuns(db, slot(randomUUID()), now)).get(task);
    assert.equal(first?.inFlight, false);
    assert.ok(first?.runId);
    const second = randomUUID();
    assert.deepEqual((await insertSlotRuns(db, slot(second), now)).get(task), {
      inFlight: true,
      overCostLimit: false,
      costLimitFirst: false,
      overRunLimit: false,
      runId: undefined,
    });
    await db.query("UPDATE runs SET status = 'completed' WHERE id = $1", [first.runId]);
    assert.deepEqual((await insertSlotRuns(db, slot(second), now)).get(task), {
      inFlight: false,
      overCostLimit: false,
      costLimitFirst: false,
      overRunLimit: false,
      runId: undefined,
    });
    const row = {
      id: second,
      organizationId: org.organizationId,
      taskId: task,
      slotAt,
      trigger: 'schedule' as const,
      now,
    };
    await assert.rejects(insertRun(db, row), /unique|duplicate/i);
    const ledger = await db.query('SELECT 1 FROM usage_ledger WHERE run_id = $1', [second]);
    assert.equal(ledger.length, 0);
  });

  test("a run for another organization's task is refused and writes nothing", async () => {
    const id = randomUUID();
    await assert.rejects(
      insertRun(db, {
        id,
        organizationId: org.organizationId,
        taskId: otherTask,
        slotAt: null,
        trigger: 'manual',
        now: new Date(),
      }),
      /not found in organization/,
    );
    assert.equal((await db.query('SELECT 1 FROM runs WHERE id = $1', [id])).length, 0);
    assert.equal((await db.query('SELECT 1 FROM usage_ledger WHERE run_id = $1', [id])).length, 0);
  });

  test("recordRunOutcome updates the ledger row's status, cost and tokens", async () => {
    const id = runIds[3] ?? '';
    assert.equal(
      await recordRunOutcome(db, id, { status: 'completed', costCents: 0.75, tokensUsed: 42 }),
      true,
    );
    const [row] = await db.query<{ status: string; cost_cents: number; tokens_used: number }>(
      'SELECT status, cost_cents, tokens_used FROM usage_ledger WHERE run_id = $1',
      [id],
    );
    assert.deepEqual(row, { status: 'completed', cost_cents: 0.75, tokens_used: 42 });
    assert.equal(
      await recordRunOutcome(db, randomUUID(), { status: 'failed', costCents: 0, tokensUsed: 0 }),
      false,
    );
  });
});
