// A cancel reaches a run executing in another process: the API process that takes the request
// and the worker process that executes the run share only the PostgreSQL database, and the
// worker is told through NOTIFY svc_run_cancel (its lease renewal is too far away to be what
// stops the run here).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Backend, call, createBackend, createOrg, createTask, kill } from './adversarial/fault-kit.ts';
import { TEST_DATABASE_URL } from './helpers/db.ts';
import { type ModelServer, startModelServer } from './helpers/model-server.ts';
import { type ServerProcess, startServerProcess } from './helpers/process.ts';
import { waitFor } from './helpers/wait.ts';

describe('canceling a run executed by another process', {
  skip: !TEST_DATABASE_URL && 'several processes need a PostgreSQL server (run with TEST_DATABASE_URL)',
}, () => {
  let backend: Backend;
  let model: ModelServer;
  const processes: ServerProcess[] = [];

  before(async () => {
    backend = await createBackend();
    // Every answer streams slowly until the service goes away.
    model = await startModelServer(() => ({ endless: 'slow words ', trickleMs: 20 }));
  });
  after(async () => {
    for (const p of processes) await kill(p);
    await model?.close();
    await backend?.dispose();
  });

  test('stops the model stream in the worker process and ends the run canceled', async () => {
    const api = await startServerProcess({ ...backend.env, SVC_ROLE: 'api' });
    processes.push(api);
    const worker = await startServerProcess({
      ...backend.env,
      SVC_ROLE: 'worker',
      SVC_MODEL_BASE_URL: model.url,
      SVC_MODEL_API_KEY: 'sk-cancel-processes',
      // Renewed every 30 s: too late for the waits below.
      SVC_RUN_LEASE_SECONDS: '90',
    });
    processes.push(worker);
    const org = await createOrg(api.url);
    const task = await createTask(api.url, org);
    const run = await call(api.url, 'POST', `/api/svc/tasks/${task.id}/run`, { key: org.apiKey });
    assert.equal(run.status, 202);
    const runId = (run.body as { id: string }).id;
    await waitFor('the answer to be streaming', async () => (model.endless.bytes > 0 ? true : undefined), {
      timeoutMs: 30_000,
    });

    const canceled = await call(api.url, 'POST', `/api/svc/runs/${runId}/cancel`, { key: org.apiKey });
    assert.equal(canceled.status, 202, JSON.stringify(canceled.body));
    await waitFor('the worker process to stop the stream', async () =>
      model.endless.stopped === 1 ? true : undefined,
    );
    await worker.waitForStdout(/run stopped: it was canceled/);
    const res = await call(api.url, 'GET', `/api/svc/runs/${runId}`, { key: org.apiKey });
    const body = res.body as Record<string, unknown>;
    assert.equal(body.status, 'failed');
    assert.equal(body.error, 'Canceled by request');
    assert.ok(body.canceledAt);
    assert.equal(body.deliveryStatus, undefined);
    const again = await call(api.url, 'POST', `/api/svc/runs/${runId}/cancel`, { key: org.apiKey });
    assert.equal(again.status, 409);
  });
});
