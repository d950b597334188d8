// Canceling runs: POST /runs/{runId}/cancel ends a pending run at once, and stops a running
// run's model stream, tool calls and stdio servers (through NOTIFY svc_run_cancel, or the next
// lease renewal when the notification is lost). A canceled run is failed with an error starting
// "Canceled", has canceledAt, keeps the usage the provider charged for, and is not delivered.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cancelRunRow } from '../src/db/sql/run-cancel.ts';
import type { ModelReply, ModelRequest, ModelServer } from './helpers/model-server.ts';
import { create, newTask, type Org, runNow, startWorkerService, unlimited } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

const NODE_DIR = dirname(process.execPath);
/** What the stand-in charges for the first answer of a run (a tool call). */
const FIRST = { prompt_tokens: 999, completion_tokens: 1, total_tokens: 1000, cost: 0.25 };

/** The text of each event of the streamed answer. */
const STREAM_PIECE = 'more words ';

const scratch = mkdtempSync(join(tmpdir(), 'svc-cancel-'));
// Servers of a root service run as another user, who must be able to write its pid here.
chmodSync(scratch, 0o777);

/**
 * A stdio MCP server (the official SDK) that writes its pid to the file named by its first
 * argument, waits its second argument in ms before it answers anything (a server that starts
 * slowly), and has a tool `slow` that marks `<pid file>.called` and then takes a minute.
 */
const SLOW_SERVER = `
  import { McpServer } from ${JSON.stringify(import.meta.resolve('@modelcontextprotocol/sdk/server/mcp.js'))};
  import { StdioServerTransport } from ${JSON.stringify(import.meta.resolve('@modelcontextprotocol/sdk/server/stdio.js'))};
  import { writeFileSync } from 'node:fs';
  const [pidFile, startMs] = process.argv.slice(1);
  writeFileSync(pidFile, String(process.pid));
  await new Promise((resolve) => setTimeout(resolve, Number(startMs)));
  const server = new McpServer({ name: 'slow', version: '1.0.0' });
  server.registerTool('slow', { description: 'Takes a minute' }, async () => {
    writeFileSync(pidFile + '.called', '1');
    await new Promise((resolve) => setTimeout(resolve, 60_000));
    return { content: [{ type: 'text', text: 'done' }] };
  });
  await server.connect(new StdioServerTransport());
`;

const isGone = (pid: number) => {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
};

/**
 * The stand-in's script, by prompt: `stream …` calls a tool the run lacks (charged FIRST), then
 * streams an answer slowly until the service goes away; `tool …` calls the server's `slow` tool
 * (charged FIRST). `charged` lists the answers the stand-in sent in full: what it bills.
 */
function script(charged: ModelReply[]) {
  return (prompt: string, _i: number, request: ModelRequest): ModelReply => {
    const answered = request.body.messages.some((m) => m.role === 'tool');
    const offered = request.body.tools?.map((t) => t.function.name) ?? [];
    let reply: ModelReply = {};
    if (prompt.startsWith('stream') && !answered)
      reply = { toolCalls: [{ name: 'no_such_tool', arguments: {} }] };
    else if (prompt.startsWith('stream')) return { endless: STREAM_PIECE, trickleMs: 20 };
    else if (prompt.startsWith('tool') && !answered)
      reply = { toolCalls: [{ name: offered.find((n) => n.endsWith('__slow')) ?? 'slow', arguments: {} }] };
    reply.usage = FIRST;
    charged.push(reply);
    return reply;
  };
}

describe('canceling a running run', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;
  const charged: ModelReply[] = [];

  before(async () => {
    ({ svc, model } = await startWorkerService(script(charged), {
      SVC_STDIO_COMMANDS: 'node',
      PATH: NODE_DIR,
      // The lease renewal (a third of it) comes too late for the waits below: what stops the
      // run there is the notification.
      SVC_RUN_LEASE_SECONDS: '90',
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc?.close();
    await model?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A task with the slow stdio server as its source and an e-mail destination, run now. */
  async function startRun(prompt: string, startMs: number) {
    const pidFile = join(scratch, `pid-${randomUUID()}`);
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: `Slow ${randomUUID()}`,
      config: {
        transport: 'stdio',
        command: 'node',
        args: ['--input-type=module', '-e', SLOW_SERVER, '--', pidFile, String(startMs)],
      },
    });
    const task = await newTask(svc, org, {
      prompt: `${prompt} ${randomUUID()}`,
      sourceIds: [source.id],
      destinations: [{ type: 'email', value: 'ops@example.com' }],
    });
    const runId = await runNow(svc, org, task.id);
    // The file may exist before its content is written: wait for the number itself.
    const pid = await waitFor('the stdio server to start', async () => {
      const written = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : 0;
      return written > 0 ? written : undefined;
    });
    assert.ok(pid > 0);
    return { task, runId, pid, pidFile };
  }

  const cancel = (runId: string, key = org.apiKey) =>
    svc.call({ method: 'POST', url: `/api/svc/runs/${runId}/cancel`, key });

  /** What every canceled run must show: the cancel's answer, the run, its ledger row, no delivery. */
  async function assertCanceled(
    runId: string,
    answer: Awaited<ReturnType<typeof cancel>>,
    tokens: number,
    cents: number,
  ) {
    assert.equal(answer.status, 202, answer.raw);
    assert.equal(answer.body.id, runId);
    assert.equal(answer.body.status, 'failed');
    assert.match(answer.body.error, /^Canceled/);
    assert.ok(answer.body.canceledAt, 'canceledAt');
    const res = await svc.call({ method: 'GET', url: `/api/svc/runs/${runId}`, key: org.apiKey });
    const run = res.body;
    assert.equal(run.status, 'failed');
    assert.equal(run.error, 'Canceled by request');
    assert.equal(run.canceledAt, answer.body.canceledAt);
    assert.equal(run.trigger, 'manual');
    assert.deepEqual({ tokens: run.tokensUsed, cents: run.costCents }, { tokens, cents });
    assert.equal(run.deliveryStatus, undefined, 'not delivered');
    assert.equal(run.deliveries, undefined);
    const [ledger] = await svc.testDb.db.query<{ status: string; tokens_used: number; cost_cents: number }>(
      'SELECT status, tokens_used, cost_cents::float8 AS cost_cents FROM usage_ledger WHERE run_id = $1',
      [runId],
    );
    assert.deepEqual(ledger, { status: 'failed', tokens_used: tokens, cost_cents: cents });
    const [jobs] = await svc.testDb.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM deliveries WHERE run_id = $1',
      [runId],
    );
    assert.equal(jobs?.n, 0, 'no delivery job');
    // Repeated, the cancel finds the run ended.
    const again = await cancel(runId);
    assert.equal(again.status, 409, again.raw);
    assert.equal(again.body.error.code, 'conflict');
    return run;
  }

  const stopLogged = (runId: string) =>
    waitFor('the worker to stop the run', async () =>
      svc.logs.some((l) => l.includes(runId) && l.includes('run stopped: it was canceled'))
        ? true
        : undefined,
    );

  test('a run canceled while the model streams its answer stops the stream and the stdio server, keeping the usage charged', async () => {
    const stoppedBefore = model.endless.stopped;
    const { task, runId, pid } = await startRun('stream', 0);
    await waitFor('the answer to be streaming', async () =>
      model.requests.filter((r) => r.body.messages.some((m) => m.content === task.prompt)).length === 2 &&
      model.endless.bytes > 0
        ? true
        : undefined,
    );
    const answer = await cancel(runId);
    await waitFor('the stream to be stopped', async () =>
      model.endless.stopped === stoppedBefore + 1 ? true : undefined,
    );
    await waitFor(`stdio server ${pid} to be gone`, async () => (isGone(pid) ? true : undefined));
    await stopLogged(runId);
    // The first answer as the stand-in charged it, and the streamed one, cut off, estimated at
    // 4 characters a token from what was sent and what came (a provider bills a stopped
    // stream's prompt and what it generated until then).
    const streamed = model.requests.filter((r) => r.body.messages.some((m) => m.content === task.prompt))[1];
    assert.ok(streamed);
    const sent = JSON.stringify(streamed.body.messages).length + JSON.stringify(streamed.body.tools).length;
    const promptTokens = Math.ceil(sent / 4);
    const mostReceived = Math.ceil((model.endless.events * STREAM_PIECE.length) / 4);
    const [ledger] = await svc.testDb.db.query<{ tokens_used: number; cost_cents: number }>(
      'SELECT tokens_used, cost_cents::float8 AS cost_cents FROM usage_ledger WHERE run_id = $1',
      [runId],
    );
    assert.ok(ledger);
    const estimated = ledger.tokens_used - FIRST.total_tokens;
    assert.ok(
      estimated > promptTokens && estimated <= promptTokens + mostReceived,
      `${estimated} tokens estimated for ${promptTokens} sent and at most ${mostReceived} received`,
    );
    assert.ok(ledger.cost_cents > FIRST.cost * 100, 'the estimate is priced');
    await assertCanceled(runId, answer, ledger.tokens_used, ledger.cost_cents);
    assert.ok(answer.body.startedAt, 'it had started');
  });

  test('a run canceled during a tool call stops the call and its stdio server, keeping the usage charged', async () => {
    const { runId, pid, pidFile } = await startRun('tool', 0);
    await waitFor('the slow tool to be called', async () =>
      existsSync(`${pidFile}.called`) ? true : undefined,
    );
    const answer = await cancel(runId);
    await waitFor(`stdio server ${pid} to be gone`, async () => (isGone(pid) ? true : undefined));
    await stopLogged(runId);
    await assertCanceled(runId, answer, 1000, 25);
  });

  test('a run canceled while its stdio server is starting kills the server before the model is asked', async () => {
    const { task, runId, pid } = await startRun('start', 60_000);
    const answer = await cancel(runId);
    await waitFor(`stdio server ${pid} to be gone`, async () => (isGone(pid) ? true : undefined));
    await stopLogged(runId);
    await assertCanceled(runId, answer, 0, 0);
    assert.equal(
      model.requests.filter((r) => r.body.messages.some((m) => m.content === task.prompt)).length,
      0,
      'no model call',
    );
  });

  test("another organization's run is not found, and stays running", async () => {
    const other = await svc.createOrg('paid');
    const { runId, pid } = await startRun('start', 60_000);
    const res = await cancel(runId, other.apiKey);
    assert.equal(res.status, 404, res.raw);
    assert.equal(res.body.error.code, 'not_found');
    const [row] = await svc.testDb.db.query<{ status: string }>('SELECT status FROM runs WHERE id = $1', [
      runId,
    ]);
    assert.equal(row?.status, 'running');
    assert.equal(isGone(pid), false);
    await cancel(runId);
    await waitFor(`stdio server ${pid} to be gone`, async () => (isGone(pid) ? true : undefined));
  });
});

describe('canceling a run whose notification is lost', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;

  before(async () => {
    // A lease of 1 s: the worker renews it about every 330 ms.
    ({ svc, model } = await startWorkerService(() => ({ endless: 'slow words ', trickleMs: 20 }), {
      SVC_RUN_LEASE_SECONDS: '1',
    }));
    org = await svc.createOrg('paid');
  });
  after(async () => {
    await svc?.close();
    await model?.close();
  });

  test('is found by the lease renewal, which stops the run as canceled', async () => {
    const task = await newTask(svc, org);
    const runId = await runNow(svc, org, task.id);
    await waitFor('the answer to be streaming', async () => (model.endless.bytes > 0 ? true : undefined));
    // The cancel's statement without its notification.
    const row = await cancelRunRow(svc.testDb.db, org.organizationId, runId, 'Canceled by request', null);
    assert.equal(row?.status, 'failed');
    await waitFor('the stream to be stopped', async () => (model.endless.stopped === 1 ? true : undefined));
    await waitFor('the worker to stop the run as canceled', async () =>
      svc.logs.some((l) => l.includes(runId) && l.includes('run stopped: it was canceled'))
        ? true
        : undefined,
    );
    assert.equal(
      svc.logs.some((l) => l.includes(runId) && l.includes('lease was lost')),
      false,
    );
  });
});

describe('canceling a pending run', () => {
  let svc: TestService;
  let org: Org;

  before(async () => {
    // No worker: runs stay pending.
    svc = await startTestService();
    org = await svc.createOrg('paid');
  });
  after(async () => {
    await svc?.close();
  });

  test('ends it at once, failed and canceled, never started, with no usage and no delivery', async () => {
    const task = await newTask(svc, org, { destinations: [{ type: 'email', value: 'ops@example.com' }] });
    const runId = await runNow(svc, org, task.id);
    const res = await svc.call({ method: 'POST', url: `/api/svc/runs/${runId}/cancel`, key: org.apiKey });
    assert.equal(res.status, 202, res.raw);
    assert.equal(res.body.status, 'failed');
    assert.equal(res.body.error, 'Canceled by request');
    assert.ok(res.body.canceledAt);
    assert.equal(res.body.completedAt, res.body.canceledAt);
    assert.equal(res.body.startedAt, undefined);
    assert.equal(res.body.durationMs, undefined);
    assert.deepEqual({ tokens: res.body.tokensUsed, cents: res.body.costCents }, { tokens: 0, cents: 0 });
    assert.equal(res.body.deliveryStatus, undefined);
    const [ledger] = await svc.testDb.db.query<{ status: string }>(
      'SELECT status FROM usage_ledger WHERE run_id = $1',
      [runId],
    );
    assert.equal(ledger?.status, 'failed');
    // The task may run again at once: its run is no longer in flight.
    const next = await svc.call({ method: 'POST', url: `/api/svc/tasks/${task.id}/run`, key: org.apiKey });
    assert.equal(next.status, 202, next.raw);
  });

  test('answers 409 conflict for a run that has ended, and 404 for an unknown run', async () => {
    const task = await newTask(svc, org);
    const runId = await runNow(svc, org, task.id);
    await svc.testDb.db.query(
      "UPDATE runs SET status = 'completed', output = 'done', completed_at = now() WHERE id = $1",
      [runId],
    );
    const res = await svc.call({ method: 'POST', url: `/api/svc/runs/${runId}/cancel`, key: org.apiKey });
    assert.equal(res.status, 409, res.raw);
    assert.equal(res.body.error.code, 'conflict');
    assert.match(res.body.error.message, /already ended \(completed\)/);
    const [row] = await svc.testDb.db.query<{ status: string; canceled_at: Date | null }>(
      'SELECT status, canceled_at FROM runs WHERE id = $1',
      [runId],
    );
    assert.deepEqual(row, { status: 'completed', canceled_at: null });
    const unknown = await svc.call({
      method: 'POST',
      url: `/api/svc/runs/${randomUUID()}/cancel`,
      key: org.apiKey,
    });
    assert.equal(unknown.status, 404, unknown.raw);
  });
});
