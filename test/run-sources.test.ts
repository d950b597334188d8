// End to end through the API and the worker: real MCP servers (the reference server over stdio
// and Streamable HTTP, an SDK server over WebSocket), a scripted model that calls their tools.
import assert from 'node:assert/strict';
import { dirname } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { everythingServerPath, startEverythingHttp, startWebSocketMcpServer } from './helpers/mcp-servers.ts';
import type { ModelReply, ModelRequest, ModelServer } from './helpers/model-server.ts';
import {
  create,
  finishedRun,
  newTask,
  type Org,
  runNow,
  startWorkerService,
  unlimited,
} from './helpers/runs.ts';
import type { TestService } from './helpers/service.ts';

/** The prompt says which tool to call, with which JSON arguments: `call <tool> <json>`. */
function callFromPrompt(prompt: string, request: ModelRequest): ModelReply {
  const [, tool, args] = /^call (\S+) (.*)$/s.exec(prompt) ?? [];
  if (!tool) return {};
  const toolResult = request.body.messages.find((m) => m.role === 'tool');
  if (toolResult) return { content: `The tool said: ${toolResult.content}` };
  const name = request.body.tools?.map((t) => t.function.name).find((n) => n.endsWith(`__${tool}`));
  if (!name) return { content: `no tool ${tool} offered` };
  return { toolCalls: [{ name, arguments: args }] };
}

const CANARY = 'canary-of-the-service-environment';

describe('runs with MCP sources', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;
  let everythingHttp: Awaited<ReturnType<typeof startEverythingHttp>>;
  let websocket: Awaited<ReturnType<typeof startWebSocketMcpServer>>;

  before(async () => {
    // The service's own environment: a stdio server must see none of it.
    process.env.SVC_TEST_SERVICE_CANARY = CANARY;
    everythingHttp = await startEverythingHttp();
    websocket = await startWebSocketMcpServer({ requiredBearer: 'ws-secret-token' });
    ({ svc, model } = await startWorkerService((prompt, _i, request) => callFromPrompt(prompt, request), {
      SVC_STDIO_COMMANDS: 'node[GREETING]',
      SVC_ALLOW_PRIVATE_URLS: 'true',
      // The service's PATH, where stdio commands are looked up: here, the test's node.
      PATH: dirname(process.execPath),
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    delete process.env.SVC_TEST_SERVICE_CANARY;
    await svc.close();
    await model.close();
    await everythingHttp.close();
    await websocket.close();
  });

  const testSource = (id: string) =>
    svc.call({ method: 'POST', url: `/api/svc/sources/${id}/test`, key: org.apiKey });

  async function runWith(sourceId: string, prompt: string) {
    const task = await newTask(svc, org, { prompt, sourceIds: [sourceId] });
    return finishedRun(svc, org, await runNow(svc, org, task.id), 30_000);
  }

  test('a stdio source of the reference server lists its real tools and a run gets the echo back', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Everything (stdio)',
      slug: 'everything',
      config: { transport: 'stdio', command: 'node', args: [everythingServerPath, 'stdio'] },
    });
    const tested = await testSource(source.id);
    assert.equal(tested.status, 200, tested.raw);
    assert.equal(tested.body.success, true, tested.body.message);
    const names = tested.body.tools.map((t: { name: string }) => t.name);
    for (const name of ['echo', 'get-sum', 'get-env']) assert.ok(names.includes(name), `${name} in ${names}`);
    const echo = tested.body.tools.find((t: { name: string }) => t.name === 'echo');
    assert.equal(echo.inputSchema.properties.message.type, 'string');

    const run = await runWith(source.id, 'call echo {"message":"hello from the run"}');
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.output, 'The tool said: Echo: hello from the run');
    const offered = model.requests.at(-1)?.body.tools?.map((t) => t.function.name) ?? [];
    assert.ok(offered.includes('everything__echo'), 'tools are offered as <slug>__<tool>');
  });

  test("a stdio server sees only its source's env, none of the service's environment", async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Env printer',
      config: {
        transport: 'stdio',
        command: 'node',
        args: [everythingServerPath, 'stdio'],
        env: { GREETING: 'hello-from-config-env' },
      },
    });
    const run = await runWith(source.id, 'call get-env {}');
    assert.equal(run.status, 'completed', run.error);
    assert.match(run.output, /hello-from-config-env/);
    assert.ok(!run.output.includes(CANARY), 'the canary of the service environment is not there');
    assert.ok(!run.output.includes('sk-test-model-key'), 'the model key is not there');
    assert.doesNotMatch(run.output, /"(USER|SVC_[A-Z_]+|DATABASE_URL)"/);
    // HOME is the server's own empty directory, never the service's.
    assert.match(run.output, /svc-mcp-/);
  });

  test('a Streamable HTTP source of the reference server lists its tools and a run adds two numbers', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Everything (http)',
      config: { transport: 'http', url: everythingHttp.url },
    });
    const tested = await testSource(source.id);
    assert.equal(tested.body.success, true, tested.body.message);
    assert.ok(tested.body.tools.some((t: { name: string }) => t.name === 'get-sum'));
    const run = await runWith(source.id, 'call get-sum {"a":2,"b":40}');
    assert.equal(run.status, 'completed', run.error);
    assert.match(run.output, /^The tool said: .*\b42\b/s);
  });

  test('a WebSocket source built with the SDK authenticates with its bearer token and adds', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Calculator (ws)',
      config: { transport: 'websocket', url: websocket.url },
      authType: 'bearer',
      authConfig: { token: 'ws-secret-token' },
    });
    const tested = await testSource(source.id);
    assert.equal(tested.body.success, true, tested.body.message);
    assert.deepEqual(tested.body.tools.map((t: { name: string }) => t.name).sort(), ['add', 'whoami']);
    assert.ok(!tested.raw.includes('ws-secret-token'), 'the token is never shown');
    const run = await runWith(source.id, 'call add {"a":2,"b":3}');
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.output, 'The tool said: 5');
  });

  test('a wrong token is a failed test with a clear message, and a run with it fails naming the source', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Calculator with a wrong token',
      config: { transport: 'websocket', url: websocket.url },
      authType: 'bearer',
      authConfig: { token: 'not-the-token' },
    });
    const tested = await testSource(source.id);
    assert.equal(tested.status, 200);
    assert.equal(tested.body.success, false);
    assert.match(tested.body.message, /Calculator with a wrong token/);
    assert.match(tested.body.message, /401|auth/i);
    assert.ok(!tested.raw.includes('not-the-token'));
    const read = await svc.call({ method: 'GET', url: `/api/svc/sources/${source.id}`, key: org.apiKey });
    assert.equal(read.body.isActive, false);
    const run = await runWith(source.id, 'call add {"a":1,"b":1}');
    assert.equal(run.status, 'failed');
    assert.match(run.error, /Calculator with a wrong token/);
  });

  test('a stdio command the operator has since removed from the allowlist is refused at start', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Was allowed',
      config: { transport: 'stdio', command: 'node', args: [everythingServerPath, 'stdio'] },
    });
    // As if SVC_STDIO_COMMANDS no longer listed node: the stored source stays, starting it does not.
    await svc.service.deps.db.query(
      `UPDATE sources SET config = jsonb_set(config, '{command}', '"npx"') WHERE id = $1`,
      [source.id],
    );
    const tested = await testSource(source.id);
    assert.equal(tested.body.success, false);
    assert.match(tested.body.message, /SVC_STDIO_COMMANDS|not allowed|allowlist/i);
  });

  test('a connector source answers that no connector provider is configured', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Connector',
      config: { transport: 'http', url: everythingHttp.url },
      authType: 'connector',
    });
    const tested = await testSource(source.id);
    assert.equal(tested.body.success, false);
    assert.match(tested.body.message, /connector provider not configured/);
  });
});
