// Process faults with the real entry point in child processes: a worker killed mid-run (separate
// api and worker processes on PostgreSQL), the embedded single process killed mid-run and
// restarted on its data directory, and SIGTERM draining in-flight runs. Each ends with what the
// database holds: every run ended exactly once, none lost, duplicated or left running.
//
// Existing coverage this file builds on rather than repeats: many tasks due at once and a
// SIGKILLed all-roles process among three (test/scheduler-processes.test.ts); an in-flight
// request drained by SIGTERM (test/processes.test.ts); the worker's grace period in-process
// (test/worker.test.ts).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TEST_DATABASE_URL } from '../helpers/db.ts';
import { type ModelServer, startModelServer } from '../helpers/model-server.ts';
import { type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';
import {
  type Backend,
  call,
  createBackend,
  createOrg,
  createTask,
  kill,
  type Org,
  runNow,
  runsOfTask,
  settledRun,
  terminate,
} from './fault-kit.ts';

/** Short leases so that a dead worker's runs are taken over within seconds. */
const LEASE_SECONDS = '2';
const GRACE_SECONDS = 6;

/**
 * The model stand-in: a prompt starting with `hold` gets no answer the first time it is sent
 * (the run is surely in flight when the test acts) and an answer after that; `slow` answers
 * after three seconds (well inside the grace period); anything else at once.
 */
async function startScriptedModel() {
  const seen = new Map<string, number>();
  const model = await startModelServer((req) => {
    const prompt = req.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
    const n = (seen.get(prompt) ?? 0) + 1;
    seen.set(prompt, n);
    if (prompt.startsWith('hold') && n === 1) return { hang: true };
    if (prompt.startsWith('slow')) return { delayMs: 3000 };
    return {};
  });
  return { model, timesAsked: (prompt: string) => seen.get(prompt) ?? 0 };
}

function commonEnv(backend: Backend, model: ModelServer): Record<string, string> {
  return {
    ...backend.env,
    SVC_MODEL_BASE_URL: model.url,
    SVC_MODEL_API_KEY: 'sk-test-model-key',
    SVC_RUN_LEASE_SECONDS: LEASE_SECONDS,
    SVC_ALLOW_PRIVATE_URLS: 'true',
    SVC_DELIVERY_RETRY_SCHEDULE: '200ms,200ms',
  };
}

/** Run ids in the webhooks a receiver got, one entry per request. */
const hookedRunIds = (hook: WebhookReceiver) =>
  hook.requests.map((r) => (JSON.parse(r.body) as { data: { run: { id: string } } }).data.run.id);

interface Held {
  manual: { taskId: string; prompt: string; runId: string };
  scheduled: { taskId: string; prompt: string };
}

/** A run-now run and a scheduled (`once`) run, both waiting on the model when this returns. */
async function startHeldRuns(
  base: string,
  org: Org,
  hook: WebhookReceiver,
  timesAsked: (p: string) => number,
): Promise<Held> {
  const destinations = [{ type: 'webhook', value: hook.url }];
  const manualTask = await createTask(base, org, { prompt: `hold manual ${randomUUID()}`, destinations });
  const runId = await runNow(base, org, manualTask.id);
  const onceTask = await createTask(base, org, {
    prompt: `hold once ${randomUUID()}`,
    schedule: 'once',
    destinations,
  });
  await waitFor('both runs to be in flight at the model', async () =>
    timesAsked(manualTask.prompt) === 1 && timesAsked(onceTask.prompt) === 1 ? true : undefined,
  );
  return {
    manual: { taskId: manualTask.id, prompt: manualTask.prompt, runId },
    scheduled: { taskId: onceTask.id, prompt: onceTask.prompt },
  };
}

/**
 * After recovery: each held task has exactly one run, completed with the model's answer and
 * delivered once; the model was asked twice (the lost attempt and the one that counted).
 * Returns the two run ids.
 */
async function assertRecoveredOnce(
  base: string,
  org: Org,
  held: Held,
  timesAsked: (p: string) => number,
): Promise<string[]> {
  const ids: string[] = [];
  for (const { taskId, prompt } of [held.manual, held.scheduled]) {
    const scheduledRun = await waitFor(`a run of task ${taskId}`, async () => {
      const runs = await runsOfTask(base, org, taskId);
      return runs.length ? runs : undefined;
    });
    const run = await settledRun(base, org, scheduledRun[0].id);
    assert.equal(run.status, 'completed', JSON.stringify(run));
    assert.equal(run.output, `Answer to: ${prompt}`);
    assert.equal(run.deliveryStatus, 'delivered', JSON.stringify(run.deliveries));
    assert.equal(run.deliveries.length, 1);
    assert.equal(run.deliveries[0].attempts.length, 1, 'delivered with one attempt');
    assert.equal((await runsOfTask(base, org, taskId)).length, 1, 'one run for the task, never two');
    assert.equal(timesAsked(prompt), 2, 'the lost attempt and the one that counted');
    ids.push(run.id);
  }
  assert.equal(ids[0], held.manual.runId, 'the run-now run is the one that ended');
  return ids;
}

/** What the database holds about the runs, read once no process is running. */
async function assertEndedOnceInDatabase(backend: Backend, org: Org, recovered: string[], total: number) {
  const runs = await backend.query<{ id: string; status: string; attempts: number }>(
    'SELECT id, status, attempts FROM runs WHERE organization_id = $1',
    [org.organizationId],
  );
  assert.equal(runs.length, total, 'no run lost, none added');
  assert.deepEqual(
    runs.filter((r) => r.status !== 'completed'),
    [],
    'none left pending or running, none failed',
  );
  for (const id of recovered) {
    assert.equal(runs.find((r) => r.id === id)?.attempts, 2, 'taken over after the lease expired');
  }
  const ledger = await backend.query<{ run_id: string; status: string }>(
    'SELECT run_id, status FROM usage_ledger WHERE organization_id = $1',
    [org.organizationId],
  );
  assert.equal(ledger.length, total, 'one usage row per run');
  assert.equal(new Set(ledger.map((l) => l.run_id)).size, total);
  assert.ok(ledger.every((l) => l.status === 'completed'));
  const deliveries = await backend.query<{ run_id: string; status: string; attempts: number }>(
    `SELECT d.run_id, d.status, (SELECT count(*)::int FROM delivery_attempts a WHERE a.delivery_id = d.id) AS attempts
       FROM deliveries d WHERE d.organization_id = $1`,
    [org.organizationId],
  );
  assert.equal(deliveries.length, total, 'one delivery per run');
  assert.ok(deliveries.every((d) => d.status === 'delivered' && d.attempts === 1));
}

/** A database, the scripted model and a webhook receiver per suite; processes killed after it. */
function useKilledProcessFixture() {
  let backend: Backend | undefined;
  let scripted: Awaited<ReturnType<typeof startScriptedModel>> | undefined;
  let hook: WebhookReceiver | undefined;
  const servers: ServerProcess[] = [];
  before(async () => {
    backend = await createBackend();
    scripted = await startScriptedModel();
    hook = await startWebhookReceiver();
  });
  after(async () => {
    for (const s of servers) await kill(s);
    await scripted?.model.close();
    await hook?.close();
    await backend?.dispose();
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the fixture is read before its before() hook ran');
    return value;
  };
  return {
    servers,
    get backend() {
      return ready(backend);
    },
    get scripted() {
      return ready(scripted);
    },
    get hook() {
      return ready(hook);
    },
  };
}

describe('a worker process killed with SIGKILL mid-run', {
  skip:
    !TEST_DATABASE_URL && 'separate api and worker processes need PostgreSQL (run with TEST_DATABASE_URL)',
}, () => {
  const fx = useKilledProcessFixture();

  test('its runs are taken over by a new worker and end exactly once', async () => {
    const env = commonEnv(fx.backend, fx.scripted.model);
    const api = await startServerProcess({ ...env, SVC_ROLE: 'api,scheduler' });
    fx.servers.push(api);
    const victim = await startServerProcess({ ...env, SVC_ROLE: 'worker' });
    fx.servers.push(victim);
    const org = await createOrg(api.url);
    const held = await startHeldRuns(api.url, org, fx.hook, fx.scripted.timesAsked);
    const leased = await fx.backend.query<{ lease_owner: string }>(
      "SELECT lease_owner FROM runs WHERE organization_id = $1 AND status = 'running'",
      [org.organizationId],
    );
    assert.equal(leased.length, 2);
    assert.ok(leased.every((r) => r.lease_owner.includes(`:${victim.child.pid}:`)));

    await kill(victim);
    const successor = await startServerProcess({ ...env, SVC_ROLE: 'worker' });
    fx.servers.push(successor);
    const ids = await assertRecoveredOnce(api.url, org, held, fx.scripted.timesAsked);
    assert.deepEqual(hookedRunIds(fx.hook).sort(), [...ids].sort(), 'one webhook per run');

    const billing = await call(
      api.url,
      'GET',
      `/api/svc/billing/status?organizationId=${org.organizationId}`,
      {
        key: org.apiKey,
      },
    );
    assert.equal(billing.body.runsUsed, 2, 'each run counted once');

    assert.equal(await terminate(successor), 0);
    assert.equal(await terminate(api), 0);
    await assertEndedOnceInDatabase(fx.backend, org, ids, 2);
    assert.equal(fx.hook.requests.length, 2, 'nothing delivered twice, even later');
  });
});

describe('the embedded process killed with SIGKILL mid-run', {
  skip: !!TEST_DATABASE_URL && 'embedded mode (PGlite): runs in the pass without TEST_DATABASE_URL',
}, () => {
  const fx = useKilledProcessFixture();

  test('restarts on its data directory with the earlier data intact and ends the runs exactly once', async () => {
    const env = commonEnv(fx.backend, fx.scripted.model);
    const first = await startServerProcess(env);
    fx.servers.push(first);
    const org = await createOrg(first.url);
    // Written before the kill: a task, a finished and delivered run, a skill.
    const done = await createTask(first.url, org, {
      prompt: `earlier ${randomUUID()}`,
      destinations: [{ type: 'webhook', value: fx.hook.url }],
    });
    const earlier = await settledRun(first.url, org, await runNow(first.url, org, done.id));
    assert.equal(earlier.status, 'completed');
    const skill = await call(first.url, 'POST', '/api/svc/skills', {
      key: org.apiKey,
      body: { organizationId: org.organizationId, name: 'Tone', content: 'Be brief.' },
    });
    assert.equal(skill.status, 201);

    const held = await startHeldRuns(first.url, org, fx.hook, fx.scripted.timesAsked);
    await kill(first);
    const lockFile = join(fx.backend.dataDir ?? '', 'svc.lock');
    assert.ok(existsSync(lockFile), 'the lock of the killed process is left behind');
    // `<pid> <start time> <boot id>` (src/db/data-dir-lock.ts).
    assert.equal(readFileSync(lockFile, 'utf8').split(' ')[0], String(first.child.pid));

    const second = await startServerProcess(env);
    fx.servers.push(second);
    // The data written before the kill: the key still works, the run reads back unchanged.
    const again = await call(second.url, 'GET', `/api/svc/runs/${earlier.id}`, { key: org.apiKey });
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, earlier);
    const skillAgain = await call(second.url, 'GET', `/api/svc/skills/${skill.body.id}`, { key: org.apiKey });
    assert.equal(skillAgain.status, 200);
    assert.equal(skillAgain.body.content, 'Be brief.');

    const ids = await assertRecoveredOnce(second.url, org, held, fx.scripted.timesAsked);
    assert.deepEqual(hookedRunIds(fx.hook).sort(), [earlier.id, ...ids].sort(), 'one webhook per run');
    assert.equal(await terminate(second), 0);
    assert.ok(!existsSync(lockFile), 'a clean stop removes the lock');
    await assertEndedOnceInDatabase(fx.backend, org, ids, 3);
    assert.equal(fx.hook.requests.length, 3, 'nothing delivered twice, even later');
  });
});

describe('SIGTERM drains the process', () => {
  let backend: Backend;
  let scripted: Awaited<ReturnType<typeof startScriptedModel>>;
  let env: Record<string, string>;
  const servers: ServerProcess[] = [];
  // Past the grace period plus the 10 s margin, the process must have exited by itself.
  const drainDeadlineMs = (GRACE_SECONDS + 10) * 1000 + 5000;
  const start = async () => {
    const s = await startServerProcess(env);
    servers.push(s);
    return s;
  };
  const runRow = async (id: string) =>
    (
      await backend.query<{ status: string; attempts: number; lease_owner: string | null }>(
        'SELECT status, attempts, lease_owner FROM runs WHERE id = $1',
        [id],
      )
    )[0];

  before(async () => {
    backend = await createBackend();
    scripted = await startScriptedModel();
    env = {
      ...commonEnv(backend, scripted.model),
      // One run at a time, so a second run waits in the queue behind the first.
      SVC_WORKER_CONCURRENCY: '1',
      SVC_SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS),
    };
  });
  after(async () => {
    for (const s of servers) await kill(s);
    await scripted?.model.close();
    await backend?.dispose();
  });

  test('a run in flight finishes, a queued run is not taken, and the process exits 0', async () => {
    const server = await start();
    const org = await createOrg(server.url);
    const slow = await createTask(server.url, org, { prompt: `slow ${randomUUID()}` });
    const waiting = await createTask(server.url, org);
    const slowRun = await runNow(server.url, org, slow.id);
    await waitFor('the run to reach the model', async () =>
      scripted.timesAsked(slow.prompt) ? true : undefined,
    );
    const queued = { id: await runNow(server.url, org, waiting.id), prompt: waiting.prompt };
    const before = await call(server.url, 'GET', `/api/svc/runs/${queued.id}`, { key: org.apiKey });
    assert.equal(before.body.status, 'pending', 'the second run waits for the worker');

    assert.equal(await terminate(server, drainDeadlineMs), 0);
    assert.match(server.stdout(), /"msg":"shutting down"/);
    const finished = await runRow(slowRun);
    assert.equal(finished?.status, 'completed', 'the in-flight run finished during the drain');
    assert.equal(finished?.attempts, 1);
    assert.deepEqual(
      await runRow(queued.id),
      { status: 'pending', attempts: 0, lease_owner: null },
      'no claim after SIGTERM: the queued run is still waiting',
    );
    assert.equal(scripted.timesAsked(queued.prompt), 0);

    // The run queued before the stop is taken by the next process.
    const next = await start();
    const run = await settledRun(next.url, org, queued.id);
    assert.equal(run.status, 'completed');
    assert.equal(await terminate(next, drainDeadlineMs), 0);
  });

  test('a run still going at the end of the grace period goes back to the queue and is completed after a restart', async () => {
    const server = await start();
    const org = await createOrg(server.url);
    const stuck = await createTask(server.url, org, { prompt: `hold drain ${randomUUID()}` });
    const stuckRun = await runNow(server.url, org, stuck.id);
    await waitFor('the run to reach the model', async () =>
      scripted.timesAsked(stuck.prompt) ? true : undefined,
    );
    assert.equal(await terminate(server, drainDeadlineMs), 0);
    assert.match(server.stdout(), /run released to the queue: shutdown grace period over/);
    assert.deepEqual(
      await runRow(stuckRun),
      { status: 'pending', attempts: 0, lease_owner: null },
      'released, the cut-off attempt not counted',
    );

    const next = await start();
    const completed = await settledRun(next.url, org, stuckRun);
    assert.equal(completed.status, 'completed');
    assert.equal(completed.output, `Answer to: ${stuck.prompt}`);
    assert.equal(scripted.timesAsked(stuck.prompt), 2);
    assert.equal((await runsOfTask(next.url, org, stuck.id)).length, 1);
    assert.equal(await terminate(next, drainDeadlineMs), 0);
    const ledger = await backend.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM usage_ledger WHERE run_id = $1',
      [stuckRun],
    );
    assert.equal(ledger[0]?.n, 1, 'one usage row for the released and completed run');
  });
});
