// The service as an MCP server (/api/svc/mcp), driven by the official SDK's client over a real
// socket: the tools an agent sees, a task created, run and read through them, validation
// errors as tool errors, organizations kept apart, the API key and the rate limit.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type ModelServer, startModelServer } from './helpers/model-server.ts';
import type { Org } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The MCP Inspector's CLI, when npm already holds it: it is not a dependency (its package has an
 * install script and pulls in a web UI, a terminal UI and a native keyring module), and a test
 * must not download. `npx --no --offline` runs it from npm's cache or not at all.
 */
const INSPECTOR = ['--no', '--offline', '@modelcontextprotocol/inspector@2.12.0', '--cli'];
const inspectorHere =
  spawnSync('npx', [...INSPECTOR, '--version'], { stdio: 'ignore', timeout: 60_000 }).status === 0;

function inspect(args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile('npx', [...INSPECTOR, ...args], { timeout: 60_000 }, (err, stdout) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout }),
    );
  });
}

type ToolAnswer = { isError?: boolean; content: { type: string; text: string }[] };

const TOOL_NAMES = [
  'list_tasks',
  'get_task',
  'create_task',
  'update_task',
  'delete_task',
  'pause_task',
  'resume_task',
  'run_task_now',
  'list_runs',
  'get_run',
  'cancel_run',
  'preview_schedule',
  'list_models',
  'list_skills',
  'list_sources',
  'get_usage',
  'get_billing_status',
];

describe('the MCP server at /api/svc/mcp', () => {
  let svc: TestService;
  let model: ModelServer;
  let endpoint: URL;
  let first: Org;
  let second: Org;
  const clients: Client[] = [];

  /** An MCP client connected with an organization's key, as an agent's host would be. */
  async function connect(org: Org): Promise<Client> {
    const client = new Client({ name: 'test-agent', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(endpoint, {
      requestInit: { headers: { authorization: `Bearer ${org.apiKey}` } },
    });
    await client.connect(transport);
    clients.push(client);
    return client;
  }

  /** Calls a tool and parses its JSON answer. */
  async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
    const answer = (await client.callTool({ name, arguments: args })) as ToolAnswer;
    const text = answer.content[0]?.text ?? '';
    return { isError: answer.isError === true, body: JSON.parse(text), text };
  }

  /** The error of an HTTP answer in the API's envelope. */
  const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string } }).error;

  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };
  const post = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...headers,
      },
      body: JSON.stringify(body),
    });

  before(async () => {
    model = await startModelServer();
    svc = await startTestService({
      listen: true,
      startLoops: true,
      env: { HOST: '127.0.0.1', SVC_MODEL_BASE_URL: model.url, SVC_MODEL_API_KEY: 'sk-test-model-key' },
    });
    assert.ok(svc.service.url, 'the service listens');
    endpoint = new URL('/api/svc/mcp', svc.service.url);
    first = await svc.createOrg('paid');
    second = await svc.createOrg('paid');
  });
  after(async () => {
    for (const client of clients) await client.close();
    await svc?.close();
    await model?.close();
  });

  test('an agent lists the tools: snake_case names, descriptions, annotations, no organizationId argument', async () => {
    const client = await connect(first);
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
    for (const tool of tools) {
      assert.match(tool.name, /^[a-z]+(_[a-z]+)*$/);
      assert.ok((tool.description ?? '').length > 40, `${tool.name} is described`);
      assert.equal(tool.inputSchema.type, 'object');
      assert.equal((tool.inputSchema as { additionalProperties?: boolean }).additionalProperties, false);
      assert.ok(
        !('organizationId' in (tool.inputSchema.properties ?? {})),
        `${tool.name} takes no organizationId`,
      );
      assert.equal(
        typeof tool.annotations?.readOnlyHint,
        'boolean',
        `${tool.name} says whether it only reads`,
      );
    }
    const byName = new Map(tools.map((t) => [t.name, t]));
    assert.equal(byName.get('delete_task')?.annotations?.destructiveHint, true);
    assert.equal(byName.get('list_tasks')?.annotations?.readOnlyHint, true);
    assert.deepEqual(byName.get('create_task')?.inputSchema.required, ['name', 'prompt']);
    assert.match(byName.get('create_task')?.description ?? '', /cents/);
    assert.match(byName.get('create_task')?.description ?? '', /IANA/);
  });

  test("the MCP Inspector's CLI lists the tools and calls one with the key in a header", {
    skip:
      !inspectorHere &&
      'the Inspector is not in npm’s cache (npx @modelcontextprotocol/inspector@2.12.0 once)',
  }, async () => {
    const target = [
      endpoint.href,
      '--transport',
      'http',
      '--header',
      `Authorization: Bearer ${first.apiKey}`,
    ];
    const listed = await inspect([...target, '--method', 'tools/list']);
    assert.equal(listed.code, 0, listed.stdout);
    const names = (JSON.parse(listed.stdout) as { tools: { name: string }[] }).tools.map((t) => t.name);
    assert.deepEqual(names.sort(), [...TOOL_NAMES].sort());

    const called = await inspect([
      ...target,
      ...['--method', 'tools/call', '--tool-name', 'preview_schedule'],
      ...[
        '--tool-arg',
        'schedule=daily',
        '--tool-arg',
        'scheduleTime=08:00',
        '--tool-arg',
        'timezone=Asia/Tokyo',
      ],
    ]);
    assert.equal(called.code, 0, called.stdout);
    const slots = JSON.parse(JSON.parse(called.stdout).content[0].text);
    assert.match(slots[0].localTime, /T08:00:00\+09:00$/);

    const refused = await inspect([endpoint.href, '--transport', 'http', '--method', 'tools/list']);
    assert.notEqual(refused.code, 0, 'without the key the Inspector gets nothing');
  });

  test('an agent creates a weekly task, runs it now and reads the output of the run', async () => {
    const client = await connect(first);
    const preview = await call(client, 'preview_schedule', {
      schedule: 'weekly',
      scheduleTime: '09:30',
      scheduleDays: ['monday'],
      timezone: 'Europe/Berlin',
      count: 2,
    });
    assert.equal(preview.isError, false, preview.text);
    assert.equal(preview.body.length, 2);
    assert.match(preview.body[0].localTime, /T09:30:00\+0[12]:00$/);

    const created = await call(client, 'create_task', {
      name: 'Weekly digest',
      prompt: 'Summarise the week in one line',
      schedule: 'weekly',
      scheduleTime: '09:30',
      scheduleDays: ['monday'],
      timezone: 'Europe/Berlin',
    });
    assert.equal(created.isError, false, created.text);
    const task = created.body;
    assert.equal(task.schedule, 'weekly');
    assert.equal(task.status, 'active');
    assert.equal(task.organizationId, first.organizationId);
    assert.equal(task.nextRunAt, preview.body[0].at);

    const started = await call(client, 'run_task_now', { taskId: task.id });
    assert.equal(started.isError, false, started.text);
    assert.equal(started.body.status, 'pending');
    // The wait reads the database, not the API: polling would spend the rate limit.
    await waitFor('the run to finish', async () => {
      const [row] = await svc.testDb.db.query<{ status: string }>('SELECT status FROM runs WHERE id = $1', [
        started.body.id,
      ]);
      return row && ['completed', 'failed'].includes(row.status) ? row : undefined;
    });
    const run = await call(client, 'get_run', { runId: started.body.id });
    assert.equal(run.isError, false, run.text);
    assert.equal(run.body.status, 'completed', run.text);
    assert.equal(run.body.output, 'Answer to: Summarise the week in one line');
    assert.equal(run.body.taskId, task.id);

    const runs = await call(client, 'list_runs', { taskId: task.id });
    assert.deepEqual(
      runs.body.map((r: { id: string }) => r.id),
      [started.body.id],
    );
    const paused = await call(client, 'pause_task', { taskId: task.id });
    assert.equal(paused.body.status, 'paused');
    const resumed = await call(client, 'resume_task', { taskId: task.id });
    assert.equal(resumed.body.status, 'active');
    const usage = await call(client, 'get_usage');
    assert.equal(usage.body.totalRuns, 1);
    const billing = await call(client, 'get_billing_status');
    assert.equal(billing.body.plan, 'paid');
    assert.equal(billing.body.runsUsed, 1);
    const models = await call(client, 'list_models');
    assert.ok(models.body.some((m: { routerModelId: string }) => m.routerModelId === task.model));
  });

  test('invalid arguments come back as tool errors with the API code, message and paths', async () => {
    const client = await connect(first);
    const badTime = await call(client, 'create_task', { name: 'x', prompt: 'y', scheduleTime: '25:00' });
    assert.equal(badTime.isError, true);
    assert.equal(badTime.body.error.code, 'validation_error');
    assert.deepEqual(
      badTime.body.error.details.map((d: { path: string }) => d.path),
      ['/arguments/scheduleTime'],
    );

    const foreignField = await call(client, 'create_task', {
      name: 'x',
      prompt: 'y',
      organizationId: second.organizationId,
    });
    assert.equal(foreignField.isError, true);
    assert.equal(foreignField.body.error.details[0].path, '/arguments/organizationId');
    assert.equal(foreignField.body.error.details[0].message, 'is not a known field');

    // A rule the schema cannot express is the domain's, as in the REST API.
    const badZone = await call(client, 'create_task', { name: 'x', prompt: 'y', timezone: 'Mars/Olympus' });
    assert.equal(badZone.isError, true);
    assert.equal(badZone.body.error.code, 'validation_error');
    assert.match(badZone.text, /timezone/);

    const missing = await call(client, 'get_task', {});
    assert.equal(missing.body.error.details[0].path, '/arguments/taskId');
    const unknown = await call(client, 'drop_database');
    assert.equal(unknown.isError, true);
    assert.equal(unknown.body.error.code, 'not_found');
    for (const answer of [badTime, foreignField, badZone, missing, unknown]) {
      assert.doesNotMatch(answer.text, /at .*\.ts:\d+|stack/i, 'no stack in a tool error');
    }
    const tasks = await call(client, 'list_tasks');
    assert.ok(!tasks.body.some((t: { name: string }) => t.name === 'x'), 'nothing invalid was created');
  });

  test("another organization's key can neither see nor touch the first organization's task", async () => {
    const owner = await connect(first);
    const task = (
      await call(owner, 'create_task', { name: 'Private', prompt: 'Secret prompt', schedule: 'daily' })
    ).body;
    const run = (await call(owner, 'run_task_now', { taskId: task.id })).body;
    const other = await connect(second);
    for (const [name, args] of [
      ['get_task', { taskId: task.id }],
      ['update_task', { taskId: task.id, name: 'Taken' }],
      ['pause_task', { taskId: task.id }],
      ['run_task_now', { taskId: task.id }],
      ['list_runs', { taskId: task.id }],
      ['delete_task', { taskId: task.id }],
      ['get_run', { runId: run.id }],
      ['cancel_run', { runId: run.id }],
    ] as const) {
      const answer = await call(other, name, args);
      assert.equal(answer.isError, true, `${name}: ${answer.text}`);
      assert.equal(answer.body.error.code, 'not_found', name);
      assert.doesNotMatch(answer.text, /Secret prompt/);
    }
    const listed = await call(other, 'list_tasks');
    assert.deepEqual(listed.body, []);
    const runs = await call(other, 'list_runs');
    assert.deepEqual(runs.body, []);
    const still = await call(owner, 'get_task', { taskId: task.id });
    assert.equal(still.body.name, 'Private');
    assert.equal(still.body.status, 'active');
  });

  test('without a valid key the endpoint answers 401 in the error envelope, with the rate-limit headers', async () => {
    const attempts: Record<string, string>[] = [{}, { authorization: `Bearer sats_${'x'.repeat(40)}` }];
    for (const headers of attempts) {
      const res = await post(initialize, headers);
      assert.equal(res.status, 401);
      assert.equal((await errorOf(res)).code, 'unauthorized');
      assert.ok(res.headers.get('x-ratelimit-limit'));
    }
    const client = new Client({ name: 'no-key', version: '1.0.0' });
    await assert.rejects(client.connect(new StreamableHTTPClientTransport(endpoint)), /401|Unauthorized/i);
  });

  test('arguments, bodies and answers are bounded: the schema bounds as tool errors, 413 over 1 MiB, a tool error over a 1 MiB answer', async () => {
    const bounded = await svc.createOrg('paid');
    const client = await connect(bounded);
    const long = await call(client, 'create_task', { name: 'Long', prompt: 'x'.repeat(100_001) });
    assert.equal(long.isError, true);
    assert.equal(long.body.error.details[0].path, '/arguments/prompt');
    const tooMany = await call(client, 'list_runs', { limit: 101 });
    assert.equal(tooMany.body.error.details[0].path, '/arguments/limit');

    const huge = {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'create_task', arguments: { name: 'Huge', prompt: 'x'.repeat(1_100_000) } },
    };
    const res = await post(huge, { authorization: `Bearer ${bounded.apiKey}` });
    assert.equal(res.status, 413);
    assert.equal((await errorOf(res)).code, 'payload_too_large');

    // Eleven prompts of 100,000 characters: the list is above 1 MiB, each task alone is not.
    let lastId = '';
    for (let i = 0; i < 11; i++) {
      const made = await svc.call({
        method: 'POST',
        url: '/api/svc/tasks',
        key: bounded.apiKey,
        body: {
          organizationId: bounded.organizationId,
          name: `Big ${i}`,
          prompt: String.fromCharCode(97 + i).repeat(100_000),
        },
      });
      assert.equal(made.status, 201, made.raw);
      lastId = made.body.id;
    }
    const list = await call(client, 'list_tasks');
    assert.equal(list.isError, true);
    assert.equal(list.body.error.code, 'payload_too_large');
    // (Not list_runs: these tasks run at once, and eleven outputs echoing their prompts are as large.)
    const one = await call(client, 'get_task', { taskId: lastId });
    assert.equal(one.isError, false, one.text);
    assert.equal(one.body.prompt.length, 100_000);
  });

  test('GET and DELETE are refused with 405, a notification is accepted with 202, and a batch of messages is a 400', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(endpoint, { method, headers: { authorization: `Bearer ${first.apiKey}` } });
      assert.equal(res.status, 405);
      assert.equal(res.headers.get('allow'), 'POST');
      assert.equal((await errorOf(res)).code, 'method_not_allowed');
    }
    const notified = await post(
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { authorization: `Bearer ${first.apiKey}` },
    );
    assert.equal(notified.status, 202);
    assert.equal(await notified.text(), '', 'a notification is accepted without a body');
    const batch = await post([initialize, { ...initialize, id: 2 }], {
      authorization: `Bearer ${first.apiKey}`,
    });
    assert.equal(batch.status, 400);
    assert.equal((await errorOf(batch)).code, 'validation_error');
  });

  test("the API's rate limit applies to the MCP endpoint: 429 with Retry-After once the minute's calls are spent", async () => {
    const limited = await svc.createOrg('paid');
    const patched = await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${limited.organizationId}`,
      admin: true,
      body: { rateLimitPerMinute: 2 },
    });
    assert.equal(patched.status, 200, patched.raw);
    const auth = { authorization: `Bearer ${limited.apiKey}` };
    const statuses: number[] = [];
    let refused: Response | undefined;
    // At most two windows' worth: a minute may turn between two calls.
    for (let i = 0; i < 5 && !refused; i++) {
      const res = await post({ jsonrpc: '2.0', id: i, method: 'tools/list' }, auth);
      statuses.push(res.status);
      assert.equal(res.headers.get('x-ratelimit-limit'), '2');
      if (res.status === 429) refused = res;
      else await res.body?.cancel();
    }
    assert.ok(refused, `a call was refused: ${statuses.join(', ')}`);
    assert.ok(Number(refused.headers.get('retry-after')) > 0);
    assert.equal((await errorOf(refused)).code, 'rate_limited');
    assert.equal(statuses.filter((s) => s === 200).length >= 2, true, statuses.join(', '));
  });
});
