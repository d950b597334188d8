// Every model call's tokens and cost reach the usage ledger, whatever happens to the run while
// it is in flight. Each test lets a run's first call (a tool call) be answered and charged,
// holds its second call, and then does one thing to the run: deletes its task, takes its lease
// away, stops its worker at the end of the grace period, or fails it after too many attempts.
// The ledger, `GET /stats` and the run must then show what the provider stand-in sent. On
// PostgreSQL, a second call is also answered while its worker cannot reach the database and
// another worker takes the run over meanwhile.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { TEST_DATABASE_URL } from '../helpers/db.ts';
import { type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { type Org, runNow } from '../helpers/runs.ts';
import { startTestService, type TestService } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  type Backend,
  call,
  createBackend,
  createOrg,
  createTask,
  kill,
  startTcpProxy,
  type TcpProxy,
  throughProxy,
} from './fault-kit.ts';
import { type CountingModel, startCountingModel } from './usage-kit.ts';

const FIRST = { tokens: 1000, costUsd: 0.25 };
const SECOND = { tokens: 500, costUsd: 0.125 };

interface Setup {
  svc: TestService;
  model: CountingModel;
  org: Org;
  taskId: string;
  runId: string;
  /** Lets the held second call be answered (if its run still waits for it). */
  release(): void;
  close(): Promise<void>;
}

/** A run whose first call is answered and recorded and whose second call is held. */
async function runWithHeldSecondCall(env: Record<string, string> = {}): Promise<Setup> {
  let release = () => {};
  const held = new Promise<void>((r) => {
    release = r;
  });
  let secondCalls = 0;
  const model = await startCountingModel(({ step }) => {
    if (step === 1) return { toolCall: true, totalTokens: FIRST.tokens, costUsd: FIRST.costUsd };
    // Only the first attempt's second call is held; a later attempt is answered at once.
    return {
      toolCall: false,
      totalTokens: SECOND.tokens,
      costUsd: SECOND.costUsd,
      ...(++secondCalls === 1 && { hold: held }),
    };
  });
  const svc = await startTestService({
    startLoops: true,
    env: {
      SVC_MODEL_BASE_URL: model.url,
      SVC_MODEL_API_KEY: 'sk-usage-exact',
      SVC_RUN_LEASE_SECONDS: '1',
      ...env,
    },
  });
  const org = await svc.createOrg('paid');
  const task = await svc.call({
    method: 'POST',
    url: '/api/svc/tasks',
    key: org.apiKey,
    body: {
      organizationId: org.organizationId,
      name: 'Usage',
      prompt: `Prompt ${randomUUID()}`,
      schedule: 'daily',
    },
  });
  assert.equal(task.status, 201, task.raw);
  const runId = await runNow(svc, org, task.body.id);
  await waitFor('the second call to be asked', async () => (model.received >= 2 ? true : undefined));
  return {
    svc,
    model,
    org,
    taskId: task.body.id,
    runId,
    release,
    async close() {
      release();
      await svc.close();
      await model.close();
    },
  };
}

/** The organization's statistics once its tokens reach `tokens` (or the last ones seen). */
async function statsReaching(s: Setup, tokens: number) {
  let last: any;
  try {
    await waitFor(
      `totalTokensUsed to reach ${tokens}`,
      async () => {
        const res = await s.svc.call({
          method: 'GET',
          url: `/api/svc/stats?organizationId=${s.org.organizationId}`,
          key: s.org.apiKey,
        });
        last = res.body;
        return last.totalTokensUsed === tokens ? last : undefined;
      },
      { timeoutMs: 5_000 },
    );
  } catch {
    // The comparison below says what differs.
  }
  return last;
}

async function ledgerRow(s: Setup) {
  const [row] = await s.svc.testDb.db.query<{ status: string; tokens_used: number; cost_cents: number }>(
    'SELECT status, tokens_used, cost_cents::float8 AS cost_cents FROM usage_ledger WHERE run_id = $1',
    [s.runId],
  );
  return row;
}

/** What the stand-in sent, as the service must have counted it. */
function assertCountedAsSent(stats: any, model: CountingModel): void {
  const sent = model.totals();
  assert.deepEqual(
    { tokens: stats.totalTokensUsed, cents: stats.totalCostCents },
    { tokens: sent.tokens, cents: sent.cents },
  );
}

describe('usage of a model call is kept whatever happens to its run', () => {
  test('deleting a task mid-run keeps the usage of the calls its run made', async () => {
    const s = await runWithHeldSecondCall();
    try {
      const del = await s.svc.call({
        method: 'DELETE',
        url: `/api/svc/tasks/${s.taskId}`,
        key: s.org.apiKey,
      });
      assert.equal(del.status, 204);
      // The worker notices at its next heartbeat and stops the run: the held call is abandoned.
      await waitFor('the held call to be abandoned', async () => (s.model.waiting === 0 ? true : undefined));
      s.release();
      assert.equal(s.model.delivered.length, 1);
      const stats = await statsReaching(s, FIRST.tokens);
      assertCountedAsSent(stats, s.model);
      // The worker settles the deleted run's ledger row once its execution has returned, which
      // on a loaded machine can come after the abandoned call is seen: waited for, then compared.
      const settled = await waitFor(
        "the deleted run's ledger row to be settled",
        async () => {
          const row = await ledgerRow(s);
          return row?.status === 'failed' ? row : undefined;
        },
        { timeoutMs: 10_000 },
      ).catch(() => ledgerRow(s));
      assert.deepEqual(settled, { status: 'failed', tokens_used: FIRST.tokens, cost_cents: 25 });
    } finally {
      await s.close();
    }
  });

  test("a run whose lease is taken away keeps the usage of both attempts' calls", async () => {
    const s = await runWithHeldSecondCall();
    try {
      // As if the worker had been presumed dead: another owner, whose lease then expires.
      await s.svc.testDb.db.query("UPDATE runs SET lease_owner = 'presumed-dead' WHERE id = $1", [s.runId]);
      await waitFor('the held call to be abandoned', async () => (s.model.waiting === 0 ? true : undefined));
      s.release();
      const run = await waitFor(
        'the second attempt to complete the run',
        async () => {
          const res = await s.svc.call({ method: 'GET', url: `/api/svc/runs/${s.runId}`, key: s.org.apiKey });
          return res.body.status === 'completed' ? res.body : undefined;
        },
        { timeoutMs: 15_000 },
      );
      // Sent: the first call twice (once per attempt) and the second call once.
      assert.equal(s.model.delivered.length, 3);
      const sent = FIRST.tokens * 2 + SECOND.tokens;
      const stats = await statsReaching(s, sent);
      assertCountedAsSent(stats, s.model);
      assert.equal(run.tokensUsed, sent);
      assert.equal(run.costCents, 62.5);
    } finally {
      await s.close();
    }
  });

  test('a run given back to the queue at the end of the shutdown grace period keeps the usage of its calls', async () => {
    const s = await runWithHeldSecondCall();
    try {
      await s.svc.service.worker?.stop(100);
      s.release();
      const stats = await statsReaching(s, FIRST.tokens);
      assertCountedAsSent(stats, s.model);
      const row = await ledgerRow(s);
      assert.equal(row?.tokens_used, FIRST.tokens);
    } finally {
      await s.close();
    }
  });

  test('a run failed after too many attempts keeps the usage of the attempts it made', async () => {
    const s = await runWithHeldSecondCall({ SVC_RUN_MAX_ATTEMPTS: '1' });
    try {
      await s.svc.testDb.db.query(
        "UPDATE runs SET lease_owner = 'presumed-dead', lease_expires_at = now() - interval '1 minute' WHERE id = $1",
        [s.runId],
      );
      await waitFor('the held call to be abandoned', async () => (s.model.waiting === 0 ? true : undefined));
      s.release();
      const run = await waitFor('the run to be failed', async () => {
        const res = await s.svc.call({ method: 'GET', url: `/api/svc/runs/${s.runId}`, key: s.org.apiKey });
        return res.body.status === 'failed' ? res.body : undefined;
      });
      assert.match(run.error, /started 1 times/);
      const stats = await statsReaching(s, FIRST.tokens);
      assertCountedAsSent(stats, s.model);
      assert.equal(run.tokensUsed, FIRST.tokens);
      assert.equal(run.costCents, 25);
    } finally {
      await s.close();
    }
  });
});

test('an answer whose usage has arrived is recorded even when its run is stopped before the stream ends', async () => {
  // The second answer sends its usage, then stalls before `[DONE]`; the run is stopped meanwhile.
  const model = await startCountingModel(({ step }) => ({
    toolCall: step === 1,
    totalTokens: step === 1 ? FIRST.tokens : SECOND.tokens,
    costUsd: step === 1 ? FIRST.costUsd : SECOND.costUsd,
    stallAfterUsage: step === 2,
  }));
  const svc = await startTestService({
    startLoops: true,
    env: { SVC_MODEL_BASE_URL: model.url, SVC_MODEL_API_KEY: 'sk-usage-stall', SVC_RUN_LEASE_SECONDS: '1' },
  });
  try {
    const org = await svc.createOrg('paid');
    const task = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: org.apiKey,
      body: { organizationId: org.organizationId, name: 'Usage', prompt: 'Stall', schedule: 'daily' },
    });
    assert.equal(task.status, 201, task.raw);
    await runNow(svc, org, task.body.id);
    await waitFor('the second answer to be sent', async () =>
      model.delivered.length === 2 ? true : undefined,
    );
    // Deleting the task stops the run at the worker's next heartbeat.
    const del = await svc.call({ method: 'DELETE', url: `/api/svc/tasks/${task.body.id}`, key: org.apiKey });
    assert.equal(del.status, 204);
    await waitFor('the stalled answer to be let go', async () => (model.waiting === 0 ? true : undefined));
    const sent = model.totals();
    let stats: any;
    await waitFor('the statistics to show both answers', async () => {
      const res = await svc.call({
        method: 'GET',
        url: `/api/svc/stats?organizationId=${org.organizationId}`,
        key: org.apiKey,
      });
      stats = res.body;
      return stats.totalTokensUsed === sent.tokens ? true : undefined;
    }).catch(() => undefined);
    assert.deepEqual({ tokens: stats.totalTokensUsed, cents: stats.totalCostCents }, sent);
  } finally {
    await svc.close();
    await model.close();
  }
});

test("a provider's usage figures that are not numbers, negative or absurd are recorded within bounds, and the run completes", async () => {
  const model = await startCountingModel(({ step }) => {
    // Not numbers, then negative (both count as nothing), then far beyond any real call.
    const raw = [
      { prompt_tokens: 'many', completion_tokens: {}, total_tokens: 'lots', cost: 'free' },
      { prompt_tokens: -100, completion_tokens: -1, total_tokens: -101, cost: -2 },
      { prompt_tokens: 1e15, completion_tokens: 1, total_tokens: 1e15 + 1, cost: 1e9 },
    ][step - 1];
    return { toolCall: step < 3, totalTokens: 0, costUsd: 0, ...(raw && { rawUsage: raw }) };
  });
  const svc = await startTestService({
    startLoops: true,
    env: { SVC_MODEL_BASE_URL: model.url, SVC_MODEL_API_KEY: 'sk-usage-bounds' },
  });
  try {
    const org = await svc.createOrg('paid');
    const task = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: org.apiKey,
      body: { organizationId: org.organizationId, name: 'Usage', prompt: 'Bounds', schedule: 'daily' },
    });
    assert.equal(task.status, 201, task.raw);
    const runId = await runNow(svc, org, task.body.id);
    const run = await waitFor('the run to end', async () => {
      const res = await svc.call({ method: 'GET', url: `/api/svc/runs/${runId}`, key: org.apiKey });
      return ['completed', 'failed'].includes(res.body.status) ? res.body : undefined;
    });
    assert.equal(run.status, 'completed', run.error);
    assert.equal(model.delivered.length, 3);
    // The last call at the bounds (docs/api.md, Limits); the first two count as nothing.
    assert.deepEqual(
      { tokens: run.tokensUsed, cents: run.costCents },
      { tokens: 10_000_000, cents: 100_000 },
    );
    const stats = await svc.call({
      method: 'GET',
      url: `/api/svc/stats?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    assert.deepEqual(
      { tokens: stats.body.totalTokensUsed, cents: stats.body.totalCostCents },
      { tokens: 10_000_000, cents: 100_000 },
    );
  } finally {
    await svc.close();
    await model.close();
  }
});

describe('usage of a model call answered while the database is unreachable', {
  skip:
    !TEST_DATABASE_URL &&
    'a database outage needs a PostgreSQL server behind a proxy (run with TEST_DATABASE_URL); the embedded database has no connection to lose',
}, () => {
  let backend: Backend;
  let proxy: TcpProxy;
  let model: CountingModel;
  const processes: ServerProcess[] = [];
  let release = () => {};
  before(async () => {
    backend = await createBackend();
    const target = new URL(TEST_DATABASE_URL ?? '');
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    const held = new Promise<void>((r) => {
      release = r;
    });
    let secondCalls = 0;
    model = await startCountingModel(({ step }) =>
      step === 1
        ? { toolCall: true, totalTokens: FIRST.tokens, costUsd: FIRST.costUsd }
        : {
            toolCall: false,
            totalTokens: SECOND.tokens,
            costUsd: SECOND.costUsd,
            ...(++secondCalls === 1 && { hold: held }),
          },
    );
  });
  after(async () => {
    release();
    for (const p of processes) await kill(p);
    await proxy?.close();
    await model?.close();
    await backend?.dispose();
  });

  test('is recorded once the database is back, although another worker took the run over meanwhile', async () => {
    const env = (key: string, url: string) => ({
      ...backend.env,
      DATABASE_URL: url,
      SVC_MODEL_BASE_URL: model.url,
      SVC_MODEL_API_KEY: key,
      SVC_RUN_LEASE_SECONDS: '2',
      SVC_ROLE: 'worker',
    });
    const api = await startServerProcess({ ...backend.env, SVC_ROLE: 'api' });
    processes.push(api);
    // The first worker reaches the database through the proxy, which the test cuts.
    const cutOff = await startServerProcess(env('sk-cut-off', throughProxy(backend.url ?? '', proxy)));
    processes.push(cutOff);
    const org = await createOrg(api.url);
    const task = await createTask(api.url, org);
    const run = await call(api.url, 'POST', `/api/svc/tasks/${task.id}/run`, { key: org.apiKey });
    assert.equal(run.status, 202);
    await waitFor('the second call to be asked', async () => (model.received >= 2 ? true : undefined));

    await proxy.cut();
    // The second answer arrives while the worker cannot write it down.
    release();
    await waitFor('the held answer to be sent', async () =>
      model.delivered.length === 2 ? true : undefined,
    );
    // Another worker, with a database connection, takes the run over once its lease expires
    // and completes it (both calls again).
    const other = await startServerProcess(env('sk-other', backend.url ?? ''));
    processes.push(other);
    await waitFor(
      'the other worker to complete the run',
      async () => {
        const [row] = await backend.query<{ status: string }>('SELECT status FROM runs WHERE id = $1', [
          run.body.id,
        ]);
        return row?.status === 'completed' ? true : undefined;
      },
      { timeoutMs: 20_000 },
    );
    assert.equal(model.delivered.length, 4);
    await proxy.restore();

    // The cut-off worker writes what it was answered once it can; nothing is counted twice.
    const sent = model.totals();
    const totals = async () => {
      const [row] = await backend.query<{ tokens: number; cents: number }>(
        'SELECT tokens_used AS tokens, cost_cents::float8 AS cents FROM usage_ledger WHERE run_id = $1',
        [run.body.id],
      );
      return row;
    };
    await waitFor('the ledger to show every answer', async () =>
      (await totals())?.tokens === sent.tokens ? true : undefined,
    ).catch(() => undefined);
    assert.deepEqual(await totals(), sent);
    const stats = await call(api.url, 'GET', `/api/svc/stats?organizationId=${org.organizationId}`, {
      key: org.apiKey,
    });
    assert.deepEqual({ tokens: stats.body.totalTokensUsed, cents: stats.body.totalCostCents }, sent);
  });
});
