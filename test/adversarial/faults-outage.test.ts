// Outside failures seen by a running service process: PostgreSQL going away and coming back
// (simulated at the network level, so the shared test cluster keeps running), a webhook
// receiver and an MCP server that accept a request and never answer.
//
// Already covered elsewhere and not repeated here: a model provider that never answers
// (test/run-execution.test.ts, "a request that gets no answer is retried after the request
// timeout" and "a provider that never answers fails the run with a time-out that says so"), the
// webhook channel's own time-out (test/delivery-channels.test.ts, "a receiver that never
// answers is a retryable timeout").
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { TEST_DATABASE_URL } from '../helpers/db.ts';
import { startEverythingHttp } from '../helpers/mcp-servers.ts';
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
  type Reply,
  runNow,
  runsOfTask,
  settledRun,
  startTcpProxy,
  type TcpProxy,
  terminate,
  throughProxy,
} from './fault-kit.ts';

/** How long the database stays unreachable. */
const OUTAGE_MS = 4000;

describe('PostgreSQL unreachable for a while', {
  skip:
    !TEST_DATABASE_URL &&
    'a database outage needs a PostgreSQL server behind a proxy (run with TEST_DATABASE_URL); the embedded database has no connection to lose',
}, () => {
  let backend: Backend;
  let proxy: TcpProxy;
  let model: ModelServer;
  let server: ServerProcess | undefined;
  let locker: pg.Client | undefined;
  before(async () => {
    backend = await createBackend();
    const target = new URL(TEST_DATABASE_URL ?? '');
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    // A `slow` prompt is answered while the database is away.
    model = await startModelServer((req) =>
      (req.body.messages.at(-1)?.content ?? '').startsWith('slow') ? { delayMs: 1500 } : {},
    );
  });
  after(async () => {
    await locker?.end().catch(() => undefined);
    if (server) await kill(server);
    await proxy?.close();
    await model?.close();
    await backend?.dispose();
  });

  test('requests answer 503 and /readyz not ready meanwhile; afterwards the process serves and runs again by itself', async () => {
    server = await startServerProcess({
      ...backend.env,
      DATABASE_URL: throughProxy(backend.url ?? '', proxy),
      SVC_MODEL_BASE_URL: model.url,
      SVC_MODEL_API_KEY: 'sk-test-model-key',
      SVC_RUN_LEASE_SECONDS: '2',
      SVC_DB_POOL_SIZE: '4',
    });
    const base = server.url;
    const org = await createOrg(base);
    const task = await createTask(base, org);
    assert.equal((await call(base, 'GET', '/readyz')).status, 200);

    // Load: a mix of reads, writes and admin calls, three at a time, until told to stop.
    const replies: { phase: string; path: string; res: Reply }[] = [];
    let phase = 'before';
    let loading = true;
    const requests: [string, string, Parameters<typeof call>[3]][] = [
      ['GET', `/api/svc/tasks?organizationId=${org.organizationId}`, { key: org.apiKey }],
      [
        'POST',
        '/api/svc/skills',
        { key: org.apiKey, body: { organizationId: org.organizationId, name: 'Load', content: 'x' } },
      ],
      ['GET', `/api/svc/billing/status?organizationId=${org.organizationId}`, { key: org.apiKey }],
      ['GET', `/api/svc/runs/${randomUUID()}`, { key: org.apiKey }],
      ['GET', '/api/admin/organizations', { admin: true }],
    ];
    const loader = async (offset: number) => {
      for (let i = offset; loading; i++) {
        const [method, path, options] = requests[i % requests.length] ?? [];
        if (!method || !path) continue;
        const started = phase;
        const res = await call(base, method, path, options);
        // Sent and answered on the same side of a phase change.
        replies.push({ phase: started === phase ? phase : 'crossing', path, res });
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const load = Promise.all([0, 1, 2].map(loader));
    await waitFor('load to be answered', async () => (replies.length >= 10 ? true : undefined));

    // A request inside a transaction when the connection drops: the test holds the task's row
    // lock on a connection of its own, so the PATCH waits inside its transaction.
    const lock = new pg.Client({ connectionString: backend.url });
    locker = lock;
    await lock.connect();
    await lock.query('BEGIN');
    await lock.query('SELECT id FROM tasks WHERE id = $1 FOR UPDATE', [task.id]);
    const blocked = call(base, 'PATCH', `/api/svc/tasks/${task.id}`, {
      key: org.apiKey,
      body: { name: 'Renamed during the outage' },
    }).catch(async (err: Error) => {
      const code = await server?.exited;
      return assert.fail(`no answer (${err.cause}); the process exited with ${code}:\n${server?.stderr()}`);
    });
    await waitFor('the PATCH to wait for the row lock', async () => {
      const { rows } = await lock.query(
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
      );
      return rows.length ? true : undefined;
    });

    // A run whose model answers while the database is away.
    const inFlight = await createTask(base, org, { prompt: `slow ${randomUUID()}` });
    const inFlightRun = await runNow(base, org, inFlight.id);
    await waitFor('the run to reach the model', async () =>
      model.requests.some((r) => r.body.messages.at(-1)?.content === inFlight.prompt) ? true : undefined,
    );

    phase = 'outage';
    await proxy.cut();
    const cutOff = await blocked;
    await lock.end();
    locker = undefined;
    assert.equal(cutOff.status, 503, JSON.stringify(cutOff.body));
    assert.equal(cutOff.body.error.code, 'service_unavailable');
    const notReady = await waitFor('/readyz to say not ready', async () => {
      const res = await call(base, 'GET', '/readyz');
      return res.status === 503 ? res : undefined;
    });
    assert.equal(notReady.body.error.code, 'service_unavailable');
    const health = await call(base, 'GET', '/healthz');
    assert.equal(health.status, 200, 'the process itself is up');
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    const stillDown = await call(base, 'GET', '/readyz');
    assert.equal(stillDown.status, 503);
    phase = 'after';
    await proxy.restore();

    await waitFor('/readyz to say ready again', async () => {
      const res = await call(base, 'GET', '/readyz');
      return res.status === 200 ? res : undefined;
    });
    await waitFor('requests to succeed again', async () =>
      replies.filter((r) => r.phase === 'after' && r.res.status < 300).length >= 10 ? true : undefined,
    );
    loading = false;
    await load;

    const statuses = (which: string) => replies.filter((r) => r.phase === which).map((r) => r.res.status);
    const errors = replies.filter((r) => r.res.status >= 500);
    assert.deepEqual(
      errors.filter((r) => r.res.status !== 503),
      [],
      'no 500s: every failure is a 503',
    );
    for (const { res } of errors) {
      assert.equal(res.body?.error?.code, 'service_unavailable', JSON.stringify(res.body));
      assert.equal(res.headers.get('retry-after'), '5');
    }
    const during = statuses('outage');
    assert.ok(during.includes(503), `requests during the outage were refused with 503: ${during.join(',')}`);
    assert.ok(
      statuses('before').every((s) => s < 500),
      'nothing failed before the outage',
    );

    // Served and executing again without a restart.
    assert.equal(server.child.exitCode, null, 'the process never exited');
    const unchanged = await call(base, 'GET', `/api/svc/tasks/${task.id}`, { key: org.apiKey });
    assert.equal(unchanged.body.name, task.name, 'the PATCH answered 503 changed nothing');
    const run = await settledRun(base, org, await runNow(base, org, task.id));
    assert.equal(run.status, 'completed', 'the worker takes new runs');
    const once = await createTask(base, org, { schedule: 'once' });
    const scheduled = await waitFor('the scheduler to create the once run', async () => {
      const runs = await runsOfTask(base, org, once.id);
      return runs.length ? runs : undefined;
    });
    assert.equal((await settledRun(base, org, scheduled[0].id)).status, 'completed');
    // The run whose answer came while the database was away ends once, with its answer.
    const crossed = await settledRun(base, org, inFlightRun);
    assert.equal(crossed.status, 'completed', JSON.stringify(crossed));
    assert.equal(crossed.output, `Answer to: ${inFlight.prompt}`);
    assert.equal((await runsOfTask(base, org, inFlight.id)).length, 1);

    assert.equal(await terminate(server), 0);
    server = undefined;
    const ledger = await backend.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM usage_ledger WHERE run_id = $1',
      [inFlightRun],
    );
    assert.equal(ledger[0]?.n, 1);
    // Its answer was recorded once the database was back, not thrown away: the model was asked
    // once and the run was started once (not re-executed after its lease expired).
    assert.equal(
      model.requests.filter((r) => r.body.messages.at(-1)?.content === inFlight.prompt).length,
      1,
      'the model was asked once',
    );
    const attempts = await backend.query<{ attempts: number }>('SELECT attempts FROM runs WHERE id = $1', [
      inFlightRun,
    ]);
    assert.equal(attempts[0]?.attempts, 1);
  });
});

describe('receivers and sources that never answer', () => {
  let backend: Backend;
  let model: ModelServer;
  let server: ServerProcess | undefined;
  let mcp: { url: string; close(): Promise<void> };
  const hooks: WebhookReceiver[] = [];
  let org: Org;

  before(async () => {
    backend = await createBackend();
    mcp = await startEverythingHttp('streamableHttp');
    model = await startModelServer((req) => {
      const prompt = req.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
      const slow = req.body.tools?.find((t) => t.function.name.endsWith('__trigger-long-running-operation'));
      const asked = req.body.messages.some((m) => m.role === 'assistant');
      if (prompt.startsWith('tool') && slow && !asked) {
        // A tool call that takes ten minutes: only the run's time limit ends it.
        return { toolCalls: [{ name: slow.function.name, arguments: { duration: 600, steps: 1 } }] };
      }
      return {};
    });
    server = await startServerProcess({
      ...backend.env,
      SVC_MODEL_BASE_URL: model.url,
      SVC_MODEL_API_KEY: 'sk-test-model-key',
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_DELIVERY_RETRY_SCHEDULE: '200ms,200ms',
      SVC_RUN_TIMEOUT_SECONDS: '4',
      // The delivery time-out, shortened from its default 15 s so the hanging receiver is cut
      // off sooner; the message below proves the setting reached the channel.
      SVC_DELIVERY_TIMEOUT_SECONDS: '2',
    });
    org = await createOrg(server.url);
  });
  after(async () => {
    if (server) await terminate(server);
    await model?.close();
    await mcp?.close();
    for (const h of hooks) await h.close();
    await backend?.dispose();
  });

  test('a webhook receiver that hangs is cut off by the delivery time-out, and the retry delivers once', async () => {
    const base = server?.url ?? '';
    const hanging = await startWebhookReceiver([{ hang: true }]);
    const healthy = await startWebhookReceiver();
    hooks.push(hanging, healthy);
    const stuck = await createTask(base, org, { destinations: [{ type: 'webhook', value: hanging.url }] });
    const other = await createTask(base, org, { destinations: [{ type: 'webhook', value: healthy.url }] });
    const stuckRun = await runNow(base, org, stuck.id);
    await waitFor('the first attempt to reach the receiver', async () =>
      hanging.requests.length ? true : undefined,
    );
    // Other deliveries are not held up behind it.
    const otherRun = await settledRun(base, org, await runNow(base, org, other.id));
    assert.equal(otherRun.deliveryStatus, 'delivered');
    assert.equal(healthy.requests.length, 1);

    const run = await settledRun(base, org, stuckRun, 45_000);
    assert.equal(run.deliveryStatus, 'delivered', JSON.stringify(run.deliveries));
    const attempts = run.deliveries[0].attempts;
    assert.deepEqual(
      attempts.map((a: { outcome: string }) => a.outcome),
      ['failed', 'delivered'],
    );
    assert.match(JSON.stringify(attempts[0]), /no answer within 2 s/);
    assert.equal(hanging.requests.length, 2, 'the cut-off attempt and the retry');
    assert.equal(hanging.requests[0]?.headers['webhook-id'], hanging.requests[1]?.headers['webhook-id']);
  });

  test('an MCP tool call that never ends is stopped by the run time-out, and the worker goes on', async () => {
    const base = server?.url ?? '';
    const source = await call(base, 'POST', '/api/svc/sources', {
      key: org.apiKey,
      body: {
        organizationId: org.organizationId,
        type: 'mcp',
        name: 'Slow tools',
        config: { transport: 'http', url: mcp.url },
      },
    });
    assert.equal(source.status, 201, JSON.stringify(source.body));
    const task = await createTask(base, org, { prompt: `tool ${randomUUID()}`, sourceIds: [source.body.id] });
    const run = await settledRun(base, org, await runNow(base, org, task.id));
    assert.equal(run.status, 'failed');
    assert.match(run.error, /did not finish within 4 s/);
    const asked = model.requests.filter((r) => r.body.messages.some((m) => m.content === task.prompt));
    assert.equal(asked.length, 1, 'the model was waiting on the tool, not asked again');

    const next = await settledRun(base, org, await runNow(base, org, (await createTask(base, org)).id));
    assert.equal(next.status, 'completed', 'the worker is free for the next run');
  });
});
