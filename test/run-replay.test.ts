// Replaying runs: POST /runs/{runId}/replay creates a pending run of the same task with the
// task's current prompt, the time context of the original run's slot (or of its creation, for
// a run started on demand) and the task's model or another of the catalog; it is created like
// a run now (run limit, one run of a task at a time).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { insertRun } from '../src/db/sql/runs.ts';
import { timeContext } from '../src/runner/prompt.ts';
import type { ModelRequest, ModelServer } from './helpers/model-server.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';

const TIMEZONE = 'Europe/Paris';
/** A slot on the day Paris moves its clocks forward: its local time must come out right. */
const SLOT = new Date('2026-03-29T07:00:00.000Z');
const OTHER_MODEL = 'anthropic/claude-sonnet-4.5';

const replay = (svc: TestService, org: Org, runId: string, body?: unknown) =>
  svc.call({
    method: 'POST',
    url: `/api/svc/runs/${runId}/replay`,
    key: org.apiKey,
    ...(body !== undefined && { body }),
  });

/** A scheduled run of the task for `slot`, as the scheduler creates it. */
async function scheduledRun(svc: TestService, org: Org, taskId: string, slot: Date): Promise<string> {
  const run = await insertRun(svc.testDb.db, {
    id: randomUUID(),
    organizationId: org.organizationId,
    taskId,
    slotAt: slot,
    trigger: 'schedule',
    now: new Date(),
  });
  await svc.testDb.db.query("SELECT pg_notify('svc_runs', '')");
  return run.id;
}

describe('replaying a run', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;

  before(async () => {
    ({ svc, model } = await startWorkerService(() => ({})));
    org = await svc.createOrg('paid');
  });
  after(async () => {
    await svc?.close();
    await model?.close();
  });

  /** The request the stand-in received with this prompt (the last one). */
  const requestWith = (prompt: string): ModelRequest | undefined =>
    model.requests
      .filter((r) => r.body.messages.some((m) => m.role === 'user' && m.content === prompt))
      .at(-1);
  const timeContextOf = (request: ModelRequest | undefined) =>
    request?.body.messages.filter((m) => m.role === 'system').at(-1)?.content;

  test("a replay of a scheduled run runs the task's current prompt with the time context of the original's slot", async () => {
    const task = await newTask(svc, org, { timezone: TIMEZONE });
    const originalId = await scheduledRun(svc, org, task.id, SLOT);
    const original = await finishedRun(svc, org, originalId);
    assert.equal(original.status, 'completed', original.error);
    assert.equal(original.trigger, 'schedule');
    assert.equal(original.scheduledFor, SLOT.toISOString());
    assert.equal(original.replayOf, undefined);

    const prompt = `Changed prompt ${randomUUID()}`;
    const patched = await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${task.id}`,
      key: org.apiKey,
      body: { prompt },
    });
    assert.equal(patched.status, 200, patched.raw);
    const res = await replay(svc, org, originalId);
    assert.equal(res.status, 202, res.raw);
    assert.equal(res.body.status, 'pending');
    assert.equal(res.body.taskId, task.id);
    assert.equal(res.body.trigger, 'replay');
    assert.equal(res.body.replayOf, originalId);
    assert.equal(res.body.scheduledFor, SLOT.toISOString());
    assert.equal(res.body.model, task.model);
    assert.notEqual(res.body.id, originalId);

    const done = await finishedRun(svc, org, res.body.id);
    assert.equal(done.status, 'completed', done.error);
    assert.equal(done.output, `Answer to: ${prompt}`);
    const request = requestWith(prompt);
    assert.equal(request?.body.model, task.model);
    // Exactly what the original was told of its slot, the slot standing as "now".
    assert.equal(timeContextOf(request), timeContext(TIMEZONE, SLOT, SLOT));
    assert.match(timeContextOf(request) ?? '', /Sunday, 29 March 2026 at 09:00 CEST/);

    // A replay of the replay replays the same moment, and points at the run it was made from.
    const again = await replay(svc, org, res.body.id, {});
    assert.equal(again.status, 202, again.raw);
    assert.equal(again.body.replayOf, res.body.id);
    assert.equal(again.body.scheduledFor, SLOT.toISOString());
    await finishedRun(svc, org, again.body.id);
    assert.equal(timeContextOf(requestWith(prompt)), timeContext(TIMEZONE, SLOT, SLOT));
  });

  test('a replay of a run started on demand is told the time the original was created, as on demand', async () => {
    const task = await newTask(svc, org, { timezone: TIMEZONE });
    const originalId = await runNow(svc, org, task.id);
    const original = await finishedRun(svc, org, originalId);
    assert.equal(original.trigger, 'manual');
    assert.equal(original.scheduledFor, undefined);
    const res = await replay(svc, org, originalId);
    assert.equal(res.status, 202, res.raw);
    assert.equal(res.body.scheduledFor, undefined);
    await finishedRun(svc, org, res.body.id);
    const created = new Date(original.createdAt);
    assert.equal(timeContextOf(requestWith(task.prompt)), timeContext(TIMEZONE, created, null));
  });

  test('a replay with another model of the catalog runs with that model; one outside the catalog is refused', async () => {
    const task = await newTask(svc, org);
    const originalId = await runNow(svc, org, task.id);
    await finishedRun(svc, org, originalId);
    const res = await replay(svc, org, originalId, { model: OTHER_MODEL });
    assert.equal(res.status, 202, res.raw);
    assert.equal(res.body.model, OTHER_MODEL);
    const done = await finishedRun(svc, org, res.body.id);
    assert.equal(done.status, 'completed', done.error);
    assert.equal(done.model, OTHER_MODEL);
    assert.equal(requestWith(task.prompt)?.body.model, OTHER_MODEL);
    // The task keeps its own model.
    const after = await svc.call({ method: 'GET', url: `/api/svc/tasks/${task.id}`, key: org.apiKey });
    assert.equal(after.body.model, task.model);

    const refused = await replay(svc, org, originalId, { model: 'no/such-model' });
    assert.equal(refused.status, 400, refused.raw);
    assert.equal(refused.body.error.code, 'validation_error');
    assert.equal(refused.body.error.details[0].path, '/body/model');
    const unknownField = await replay(svc, org, originalId, { model: OTHER_MODEL, prompt: 'x' });
    assert.equal(unknownField.status, 400, unknownField.raw);
  });

  test("another organization's run, or an unknown one, is not found", async () => {
    const task = await newTask(svc, org);
    const originalId = await runNow(svc, org, task.id);
    await finishedRun(svc, org, originalId);
    const other = await svc.createOrg('paid');
    const res = await replay(svc, other, originalId);
    assert.equal(res.status, 404, res.raw);
    assert.equal(res.body.error.code, 'not_found');
    const unknown = await replay(svc, org, randomUUID());
    assert.equal(unknown.status, 404, unknown.raw);
    const [row] = await svc.testDb.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM runs WHERE task_id = $1',
      [task.id],
    );
    assert.equal(row?.n, 1, 'no run was created');
  });
});

describe('a replay is created like a run now', () => {
  let svc: TestService;
  let org: Org;

  before(async () => {
    // No worker: runs stay as the test leaves them.
    svc = await startTestService();
    org = await svc.createOrg('free');
  });
  after(async () => {
    await svc?.close();
  });

  test('it waits for the run of the task in flight (409), and counts toward the run limit (403)', async () => {
    const task = await newTask(svc, org);
    const originalId = await runNow(svc, org, task.id);
    const busy = await replay(svc, org, originalId);
    assert.equal(busy.status, 409, busy.raw);
    assert.equal(busy.body.error.code, 'conflict');

    await svc.testDb.db.query(
      "UPDATE runs SET status = 'completed', output = 'done', completed_at = now() WHERE id = $1",
      [originalId],
    );
    const limited = await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${org.organizationId}`,
      admin: true,
      body: { runsLimit: 2 },
    });
    assert.equal(limited.status, 200, limited.raw);
    const first = await replay(svc, org, originalId);
    assert.equal(first.status, 202, first.raw);
    await svc.testDb.db.query(
      "UPDATE runs SET status = 'completed', output = 'done', completed_at = now() WHERE id = $1",
      [first.body.id],
    );
    const refused = await replay(svc, org, originalId);
    assert.equal(refused.status, 403, refused.raw);
    assert.equal(refused.body.error.code, 'plan_limit_exceeded');
    const [row] = await svc.testDb.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM runs WHERE task_id = $1',
      [task.id],
    );
    assert.equal(row?.n, 2);
  });
});
