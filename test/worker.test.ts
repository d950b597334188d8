import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { modelExecutor } from '../src/runner/model-executor.ts';
import { RunWorker } from '../src/worker/worker.ts';
import { TEST_DATABASE_URL } from './helpers/db.ts';
import type { ModelReply, ModelServer } from './helpers/model-server.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService, unlimited } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

/** A run left "running" by a worker that no longer exists, its lease expired a second ago. */
async function insertOrphanedRun(
  svc: TestService,
  org: Org,
  taskId: string,
  attempts: number,
): Promise<string> {
  const id = randomUUID();
  const { db } = svc.service.deps;
  await db.query(
    `INSERT INTO runs (id, organization_id, task_id, trigger, status, created_at, started_at, lease_owner, lease_expires_at, attempts)
     VALUES ($1, $2, $3, 'manual', 'running', now(), now(), 'gone:1:abc', now() - interval '1 second', $4)`,
    [id, org.organizationId, taskId, attempts],
  );
  await db.query(
    `INSERT INTO usage_ledger (run_id, organization_id, task_id, status, created_at) VALUES ($1, $2, $3, 'running', now())`,
    [id, org.organizationId, taskId],
  );
  return id;
}

/** The worker's 'run finished' line of `runId`, parsed (written once the run's end is recorded). */
function runFinishedLine(svc: TestService, runId: string): Promise<Record<string, unknown>> {
  return waitFor('the run finished line', async () =>
    svc.logs
      .flatMap((chunk) => chunk.split('\n').filter(Boolean))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((line) => line.msg === 'run finished' && line.runId === runId),
  );
}

describe('the worker', () => {
  describe('executing runs', () => {
    let svc: TestService;
    let model: ModelServer;
    let org: Org;
    before(async () => {
      ({ svc, model } = await startWorkerService((prompt) =>
        prompt.includes('provider-cost')
          ? { usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, cost: 0.0123 } }
          : prompt.includes('no-stream')
            ? { ignoreStream: true, usage: { prompt_tokens: 20, completion_tokens: 7, total_tokens: 27 } }
            : {},
      ));
      org = await svc.createOrg('paid');
      await unlimited(svc, org);
    });
    after(async () => {
      await svc.close();
      await model.close();
    });

    test('a provider that ignores streaming and answers the whole completion as JSON has its answer and usage recorded', async () => {
      const task = await newTask(svc, org, { prompt: `no-stream ${randomUUID()}` });
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'completed', JSON.stringify(run));
      assert.equal(run.output, `Answer to: ${task.prompt}`);
      assert.equal(run.tokensUsed, 27);
    });

    test('run now is executed: the output, tokens, catalog-priced cost, duration and times are recorded', async () => {
      const task = await newTask(svc, org);
      const runId = await runNow(svc, org, task.id);
      const run = await finishedRun(svc, org, runId);
      assert.equal(run.status, 'completed', JSON.stringify(run));
      assert.equal(run.output, `Answer to: ${task.prompt}`);
      assert.equal(run.tokensUsed, 150);
      const models = (await svc.call({ method: 'GET', url: '/api/svc/models', key: org.apiKey })).body;
      const m = models.find((x: { routerModelId: string }) => x.routerModelId === task.model);
      assert.ok(m);
      // The catalog price: 100 prompt and 50 completion tokens.
      const { find } = svc.service.deps.models;
      const entry = find(task.model);
      assert.ok(entry);
      const expected =
        (100 * entry.inputCentsPerMillionTokens + 50 * entry.outputCentsPerMillionTokens) / 1e6;
      assert.ok(Math.abs(run.costCents - expected) < 1e-9, `${run.costCents} vs ${expected}`);
      assert.equal(typeof run.durationMs, 'number');
      assert.ok(run.durationMs >= 0);
      assert.ok(Date.parse(run.startedAt) <= Date.parse(run.completedAt));

      const request = model.requests.find((r) => r.body.messages.at(-1)?.content === task.prompt);
      assert.ok(request, 'the model was called with the prompt');
      assert.equal(request.body.model, task.model, "the catalog entry's routerModelId is sent as model");
      assert.equal(request.authorization, 'Bearer sk-test-model-key');
      const system = request.body.messages.filter((x) => x.role === 'system').map((x) => x.content);
      assert.match(system.join('\n'), /Current date and time: .*time zone UTC/);
      assert.match(system.join('\n'), /started on demand/);

      const stats = (
        await svc.call({
          method: 'GET',
          url: `/api/svc/stats?organizationId=${org.organizationId}`,
          key: org.apiKey,
        })
      ).body;
      assert.ok(stats.successfulRuns >= 1);
      assert.ok(stats.totalTokensUsed >= 150, 'the usage ledger has the tokens');

      // One line per run, as pino writes its lines (level, time, pid, hostname, members, msg).
      const line = await runFinishedLine(svc, runId);
      assert.deepEqual(Object.keys(line), [
        'level',
        'time',
        'pid',
        'hostname',
        'runId',
        'status',
        'durationMs',
        'msg',
      ]);
      assert.equal(line.level, 30);
      assert.equal(line.status, 'completed');
      assert.equal(line.durationMs, run.durationMs);
    });

    test('attached skills are sent as system instructions in the order the task lists them', async () => {
      const skill = async (name: string) =>
        (
          await svc.call({
            method: 'POST',
            url: '/api/svc/skills',
            key: org.apiKey,
            body: { organizationId: org.organizationId, name, content: `Instructions of ${name}` },
          })
        ).body.id as string;
      const b = await skill('Bravo');
      const a = await skill('Alpha');
      const task = await newTask(svc, org, { skillIds: [b, a] });
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'completed');
      const request = model.requests.find((r) => r.body.messages.at(-1)?.content === task.prompt);
      assert.ok(request);
      const contents = request.body.messages.map((m) => `${m.role}:${(m.content ?? '').split('\n')[0]}`);
      assert.deepEqual(contents.slice(0, 2), ['system:# Skill: Bravo', 'system:# Skill: Alpha']);
      assert.match(contents[2] ?? '', /^system:Current date and time/);
      assert.equal(contents[3], `user:${task.prompt}`);
    });

    test('a provider-reported cost wins over the catalog price', async () => {
      const task = await newTask(svc, org, { prompt: `provider-cost ${randomUUID()}` });
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'completed');
      assert.equal(run.tokensUsed, 15);
      assert.ok(Math.abs(run.costCents - 1.23) < 1e-9, String(run.costCents));
    });

    test('a scheduled once task runs by itself and is completed when its run ends', async () => {
      const res = await svc.call({
        method: 'POST',
        url: '/api/svc/tasks',
        key: org.apiKey,
        body: { organizationId: org.organizationId, name: 'Now', prompt: `once ${randomUUID()}` },
      });
      assert.equal(res.status, 201);
      const task = await waitFor('the once task to complete', async () => {
        const t = (await svc.call({ method: 'GET', url: `/api/svc/tasks/${res.body.id}`, key: org.apiKey }))
          .body;
        return t.status === 'completed' ? t : undefined;
      });
      assert.equal(task.nextRunAt, null);
      assert.ok(task.lastRunAt);
      const runs = (await svc.call({ method: 'GET', url: `/api/svc/tasks/${task.id}/runs`, key: org.apiKey }))
        .body;
      assert.equal(runs.length, 1);
      assert.equal(runs[0].status, 'completed');
    });

    test('a run whose worker died is taken over when its lease expires', async () => {
      const task = await newTask(svc, org);
      const { db } = svc.service.deps;
      const id = await insertOrphanedRun(svc, org, task.id, 1);
      const run = await finishedRun(svc, org, id);
      assert.equal(run.status, 'completed');
      const [row] = await db.query<{ attempts: number; lease_owner: string | null }>(
        'SELECT attempts, lease_owner FROM runs WHERE id = $1',
        [id],
      );
      assert.equal(row?.attempts, 2);
      assert.equal(row?.lease_owner, null);
    });

    test('a run whose workers died too often is failed with a clear error', async () => {
      const task = await newTask(svc, org);
      const id = await insertOrphanedRun(svc, org, task.id, 3);
      const run = await finishedRun(svc, org, id);
      assert.equal(run.status, 'failed');
      assert.match(run.error, /started 3 times .* stopped responding/);
    });
  });

  test('without a model API key a run fails with an error that says how to configure one', async () => {
    const svc = await startTestService({ startLoops: true });
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'failed');
      assert.match(run.error, /SVC_MODEL_API_KEY/);
      assert.equal(run.output, undefined);
    } finally {
      await svc.close();
    }
  });

  test('a provider that answers 429 then 500 is retried, honouring Retry-After, until it answers', async () => {
    const { svc, model } = await startWorkerService((_p, i) =>
      i === 0
        ? { status: 429, headers: { 'retry-after': '1' }, error: 'slow down' }
        : i === 1
          ? { status: 500, error: 'upstream hiccup' }
          : {},
    );
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'completed', run.error);
      assert.equal(model.requests.length, 3);
    } finally {
      await svc.close();
      await model.close();
    }
  });

  test('an answer stream that carries an error, is not a JSON object, or is cut off fails the run as a provider error, without a retry', async () => {
    const piece = (content: string) =>
      `data: ${JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
    const replies: ModelReply[] = [
      { rawStream: `${piece('Par')}data: {"error":{"message":"overloaded, try later"}}\n\n` },
      { rawStream: `${piece('Par')}event: error\ndata: {"error":{"message":"stream failed"}}\n\n` },
      { rawStream: `${piece('Par')}data: {"choices": [\n\n` },
      { rawStream: `${piece('Par')}data: null\n\n` },
      { rawStream: `${piece('Par')}data: {"choices": {"index": 0}}\n\n` },
      { rawStream: piece('Par'), cut: true },
    ];
    const { svc, model } = await startWorkerService((_p, i) => replies[i] ?? {});
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const errors: string[] = [];
      for (let i = 0; i < replies.length; i++) {
        const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
        assert.equal(run.status, 'failed');
        assert.equal(run.output, undefined);
        assert.equal((await runFinishedLine(svc, run.id)).errorType, 'provider_error');
        errors.push(run.error);
      }
      assert.match(errors[0] ?? '', /refused the request: overloaded, try later/);
      assert.match(errors[1] ?? '', /refused the request: stream failed/);
      assert.match(errors[2] ?? '', /answer could not be read: .*JSON/);
      assert.match(errors[3] ?? '', /answer could not be read: an event that is not a JSON object/);
      assert.match(errors[4] ?? '', /answer could not be read: its choices are not a list/);
      assert.match(errors[5] ?? '', /answer was cut off/);
      assert.equal(
        model.requests.length,
        replies.length,
        'none is retried: the provider may have charged for it',
      );
    } finally {
      await svc.close();
      await model.close();
    }
  });

  test("a provider that refuses the request fails the run with its status and message, the service's model key masked in it", async () => {
    const { svc, model } = await startWorkerService(() => ({
      status: 400,
      error: 'model does not exist for key sk-test-model-key, see the dashboard',
    }));
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'failed');
      assert.match(run.error, /HTTP 400\): model does not exist for key \S+, see the dashboard/);
      assert.ok(!run.error.includes('sk-test-model-key'), run.error);
      assert.equal(model.requests.length, 1, 'a 400 is not retried');
      const line = await runFinishedLine(svc, run.id);
      assert.equal(line.status, 'failed');
      assert.equal(line.errorType, 'provider_error');
    } finally {
      await svc.close();
      await model.close();
    }
  });

  test("a run's time limit ends it while it waits to retry the provider, not after the wait the provider asked for", async () => {
    const { svc, model } = await startWorkerService(
      () => ({ status: 503, headers: { 'retry-after': '30' }, error: 'busy' }),
      { SVC_RUN_TIMEOUT_SECONDS: '1' },
    );
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const started = Date.now();
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'failed');
      assert.match(run.error, /did not finish within 1 s/);
      assert.equal(model.requests.length, 1, 'the retry asked for 30 s later was never sent');
      assert.ok(Date.now() - started < 20_000, 'the run ended long before the 30 s wait');
    } finally {
      await svc.close();
      await model.close();
    }
  });

  test('a run still executing after the run timeout is failed with an error that says so', async () => {
    const { svc, model } = await startWorkerService(() => ({ delayMs: 4_000 }), {
      SVC_RUN_TIMEOUT_SECONDS: '1',
    });
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'failed');
      assert.match(run.error, /did not finish within 1 s/);
      assert.equal(run.output, undefined);
    } finally {
      await svc.close();
      await model.close();
    }
  });

  test('one organization cannot take more than its share of workers while another waits', async () => {
    // The worker runs 3 at once, an organization at most 2. A's answers are held until B's run
    // exists, so A's backlog is still waiting (however slowly the runs were created) when B's
    // run arrives: the free place must go to B, not to A's third run.
    let running = new Map<string, number>();
    const peak = new Map<string, number>();
    const started: string[] = [];
    let letGo: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    const { svc, model } = await startWorkerService(
      (prompt) => {
        const org = prompt.split(' ')[0] ?? '';
        started.push(org);
        running.set(org, (running.get(org) ?? 0) + 1);
        peak.set(org, Math.max(peak.get(org) ?? 0, running.get(org) ?? 0));
        const held = org === 'A' ? gate : Promise.resolve();
        void held.then(() => setTimeout(() => running.set(org, (running.get(org) ?? 1) - 1), 300));
        return { heldUntil: held, delayMs: 300 };
      },
      { SVC_WORKER_CONCURRENCY: '3', SVC_ORG_CONCURRENCY: '2' },
    );
    try {
      const a = await svc.createOrg('paid');
      const b = await svc.createOrg('paid');
      await unlimited(svc, a);
      const aRuns: string[] = [];
      for (let i = 0; i < 6; i++) {
        const t = await newTask(svc, a, { prompt: `A ${randomUUID()}` });
        aRuns.push(await runNow(svc, a, t.id));
      }
      await waitFor('A at its limit of 2 running runs', async () =>
        started.filter((o) => o === 'A').length === 2 ? true : undefined,
      );
      const bTask = await newTask(svc, b, { prompt: `B ${randomUUID()}` });
      const bRun = await runNow(svc, b, bTask.id);
      await finishedRun(svc, b, bRun);
      letGo();
      for (const id of aRuns) await finishedRun(svc, a, id);
      assert.equal(peak.get('A'), 2, 'A never had more than 2 runs at once');
      assert.equal(
        started.indexOf('B'),
        2,
        `B's run took the free place before A's backlog: ${started.join(',')}`,
      );
      running = new Map();
    } finally {
      letGo();
      await svc.close();
      await model.close();
    }
  });

  test('stopping the worker lets an in-flight run finish within the grace period', async () => {
    const { svc, model } = await startWorkerService(() => ({ delayMs: 400 }));
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const runId = await runNow(svc, org, task.id);
      await waitFor('the model call', async () => (model.requests.length ? true : undefined));
      await svc.service.worker?.stop(10_000);
      const [row] = await svc.service.deps.db.query<{ status: string }>(
        'SELECT status FROM runs WHERE id = $1',
        [runId],
      );
      assert.equal(row?.status, 'completed');
    } finally {
      await svc.close();
      await model.close();
    }
  });

  test('a run still going when the grace period ends goes back to the queue and another worker finishes it', async () => {
    const { svc, model } = await startWorkerService((_p, i) => (i === 0 ? { delayMs: 5_000 } : {}));
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const runId = await runNow(svc, org, task.id);
      await waitFor('the model call', async () => (model.requests.length ? true : undefined));
      await svc.service.worker?.stop(100);
      const { db } = svc.service.deps;
      const [row] = await db.query<{ status: string; attempts: number; lease_owner: string | null }>(
        'SELECT status, attempts, lease_owner FROM runs WHERE id = $1',
        [runId],
      );
      assert.deepEqual(row, { status: 'pending', attempts: 0, lease_owner: null });

      const next = new RunWorker(svc.service.deps, modelExecutor(svc.service.deps));
      await next.start();
      try {
        const run = await finishedRun(svc, org, runId);
        assert.equal(run.status, 'completed');
      } finally {
        await next.stop(1_000);
      }
    } finally {
      await svc.close();
      await model.close();
    }
  });
});

test('a worker-only process serves /healthz, /readyz and /metrics, and nothing of the API', async () => {
  const svc = await startTestService({ env: { SVC_ROLE: 'worker' } });
  try {
    assert.equal((await svc.call({ method: 'GET', url: '/healthz' })).status, 200);
    assert.equal((await svc.call({ method: 'GET', url: '/readyz' })).status, 200);
    const metrics = await svc.call({ method: 'GET', url: '/metrics' });
    assert.equal(metrics.status, 200);
    assert.match(metrics.raw, /svc_worker_runs_in_flight/);
    // Like any unknown path under /api/svc/, it asks for a key first; with one it would be a 404.
    const api = await svc.call({ method: 'GET', url: '/api/svc/models' });
    assert.equal(api.status, 401);
    assert.equal(
      svc.app.registeredRoutes.some((r) => r.url.startsWith('/api/')),
      false,
    );
    assert.equal(svc.service.scheduler, undefined);
    assert.ok(svc.service.worker);
  } finally {
    await svc.close();
  }
});

describe('a place given to the next run while the last answer is recorded', () => {
  test('a worker at its concurrency starts the next run while the usage of the last answer of the one before is still being written', {
    skip:
      !TEST_DATABASE_URL &&
      'holding one write while others run needs PostgreSQL (the embedded database runs one statement at a time)',
  }, async () => {
    const { svc, model } = await startWorkerService(() => ({ content: 'done' }), {
      SVC_WORKER_CONCURRENCY: '1',
    });
    // Usage writes wait for a lock this test holds: the first run's answer cannot be recorded
    // until it is released.
    const lockKey = Math.floor(Math.random() * 1_000_000_000);
    const holder = new pg.Client({ connectionString: svc.testDb.url });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [lockKey]);
      await svc.service.deps.db.exec(`
        CREATE FUNCTION test_held_usage() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_advisory_xact_lock_shared(${lockKey}); RETURN NEW; END $$;
        CREATE TRIGGER test_held_usage BEFORE INSERT ON usage_calls
          FOR EACH ROW EXECUTE FUNCTION test_held_usage();`);
      const org = await svc.createOrg('paid');
      await unlimited(svc, org);
      const first = await runNow(svc, org, (await newTask(svc, org)).id);
      await waitFor('the first run to ask the model', async () => model.requests.length === 1 || undefined);
      const second = await runNow(svc, org, (await newTask(svc, org)).id);
      await waitFor('the second run to ask the model', async () => model.requests.length === 2 || undefined);
      const [usage] = await svc.service.deps.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM usage_calls WHERE run_id = $1',
        [first],
      );
      assert.equal(usage?.n, 0, "the first run's usage was still being written");
      await holder.query('SELECT pg_advisory_unlock($1)', [lockKey]);
      for (const id of [first, second]) {
        const run = await finishedRun(svc, org, id);
        assert.equal(run.status, 'completed');
        assert.ok(run.tokensUsed > 0, 'its usage was recorded');
      }
    } finally {
      await holder.end();
      await svc.close();
      await model.close();
    }
  });
});
