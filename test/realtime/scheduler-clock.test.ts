import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ModelServer, startModelServer } from '../helpers/model-server.ts';
import { startTestService, type TestService } from '../helpers/service.ts';

/**
 * End to end on the real clock: nothing is driven by the test. The scheduler sleeps until the
 * task's slot, creates the run, and the worker executes it.
 */
describe('a daily task on the real clock', () => {
  let svc: TestService;
  let model: ModelServer;
  before(async () => {
    model = await startModelServer();
    svc = await startTestService({
      startLoops: true,
      env: { SVC_MODEL_BASE_URL: model.url, SVC_MODEL_API_KEY: 'sk-test' },
    });
  });
  after(async () => {
    await svc.close();
    await model.close();
  });

  test('fires within 2 seconds of its slot, and lastRunAt and nextRunAt advance', async () => {
    const org = await svc.createOrg('paid');
    // The next whole minute, or the one after when it is too close to set up the task in time.
    let slot = Math.ceil((Date.now() + 1) / 60_000) * 60_000;
    if (slot - Date.now() < 3_000) slot += 60_000;
    const scheduleTime = new Date(slot).toISOString().slice(11, 16);
    const created = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: org.apiKey,
      body: {
        organizationId: org.organizationId,
        name: 'Minute',
        prompt: 'What time is it?',
        schedule: 'daily',
        scheduleTime,
      },
    });
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.nextRunAt, new Date(slot).toISOString());

    const deadline = slot + 30_000;
    let run: { createdAt: string; status: string } | undefined;
    while (!run && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      const runs = await svc.call({
        method: 'GET',
        url: `/api/svc/tasks/${created.body.id}/runs`,
        key: org.apiKey,
      });
      run = runs.body[0];
    }
    assert.ok(run, 'the slot produced a run');
    const lagMs = Date.parse(run.createdAt) - slot;
    assert.ok(lagMs >= 0 && lagMs <= 2_000, `the run was created ${lagMs} ms after its slot`);

    const task = (
      await svc.call({ method: 'GET', url: `/api/svc/tasks/${created.body.id}`, key: org.apiKey })
    ).body;
    assert.equal(task.lastRunAt, run.createdAt);
    assert.equal(task.nextRunAt, new Date(slot + 86_400_000).toISOString());
  });
});
