// Adversarial: MCP servers whose answers are larger than anything the service keeps. Built with
// the official SDK (its low-level Server over Streamable HTTP, answering in JSON or as an event
// stream), they list 10,000 tools, a tool with a 5 MB schema, a tool with a 100 KB schema,
// tools adding up to more than a megabyte, or answer a call with 10 MB of text. What must hold:
// the connection test and the run fail with a message naming the bound (no silently shortened
// tool list), a message past the bound is not read whole, and a call whose answer breaks it
// fails promptly as the call's result, which the model reads; the run goes on.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { WebSocketServer } from 'ws';
import { answerStatelessMcp, WsServerTransport } from '../helpers/mcp-servers.ts';
import type { ModelReply, ModelRequest, ModelServer } from '../helpers/model-server.ts';
import {
  create,
  finishedRun,
  newTask,
  type Org,
  runNow,
  startWorkerService,
  unlimited,
} from '../helpers/runs.ts';
import type { TestService } from '../helpers/service.ts';

interface Tool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

/** An object schema whose description makes it about `bytes` long as JSON. */
const schemaOf = (bytes: number) => ({ type: 'object', properties: {}, description: 'd'.repeat(bytes) });

/**
 * A stateless Streamable HTTP MCP server (the SDK's low-level Server) with these tools; every
 * call answers `callText`. `json`: answers as JSON bodies, otherwise as event streams.
 */
interface ServerOptions {
  json: boolean;
  callText?: string;
  /** Each call takes this long; `calls` records how many ran at once at most. */
  callDelayMs?: number;
  calls?: { inFlight: number; most: number };
  /** Lists `tools` again on each of this many pages (names suffixed by the page), counting the requests in `lists`. */
  pages?: number;
  lists?: { count: number };
}

async function startServer(tools: Tool[], options: ServerOptions) {
  const http = createServer(async (req, res) => {
    if (req.method !== 'POST') return void res.writeHead(405).end();
    let body = '';
    for await (const chunk of req) body += chunk;
    const server = new Server({ name: 'big', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async (request) => {
      if (options.lists) options.lists.count++;
      if (!options.pages) return { tools };
      const page = Number(request.params?.cursor ?? 0);
      return {
        tools: tools.map((t) => ({ ...t, name: `${t.name}_p${page}` })),
        ...(page + 1 < options.pages && { nextCursor: String(page + 1) }),
      };
    });
    server.setRequestHandler(CallToolRequestSchema, async () => {
      const calls = options.calls;
      if (calls) calls.most = Math.max(calls.most, ++calls.inFlight);
      await new Promise((resolve) => setTimeout(resolve, options.callDelayMs ?? 0));
      if (calls) calls.inFlight--;
      return { content: [{ type: 'text', text: options.callText ?? 'ok' }] };
    });
    await answerStatelessMcp(server, req, res, body, { json: Boolean(options.json) });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

/** The same server over WebSocket (subprotocol mcp), one SDK Server per connection. */
async function startWsServer(tools: Tool[]) {
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    handleProtocols: (protocols) => (protocols.has('mcp') ? 'mcp' : false),
  });
  wss.on('connection', (socket) => {
    const server = new Server({ name: 'big', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
    void server.connect(new WsServerTransport(socket));
  });
  await new Promise<void>((resolve) => wss.once('listening', resolve));
  return {
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/mcp`,
    async close() {
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

const NODE_DIR = dirname(process.execPath);

/**
 * `node` arguments of a stdio MCP server (the official SDK): `huge-schema` lists a tool whose
 * schema is 5 MB (one line of 5 MB on stdout); `flood` has a tool `fetch` that writes 70 log
 * messages of 1 MiB before it answers (70 MiB in all).
 */
function stdioArgs(mode: 'huge-schema' | 'flood'): string[] {
  const script = `
    import { Server } from ${JSON.stringify(import.meta.resolve('@modelcontextprotocol/sdk/server/index.js'))};
    import { StdioServerTransport } from ${JSON.stringify(import.meta.resolve('@modelcontextprotocol/sdk/server/stdio.js'))};
    import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(import.meta.resolve('@modelcontextprotocol/sdk/types.js'))};
    const mode = process.argv.at(-1);
    const server = new Server({ name: 'big', version: '1.0.0' }, { capabilities: { tools: {}, logging: {} } });
    const schema = mode === 'huge-schema' ? { type: 'object', description: 'd'.repeat(5_000_000) } : { type: 'object' };
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'fetch', inputSchema: schema }] }));
    server.setRequestHandler(CallToolRequestSchema, async () => {
      for (let i = 0; i < 70; i++)
        await server.notification({ method: 'notifications/message', params: { level: 'info', data: 'f'.repeat(1 << 20) } });
      return { content: [{ type: 'text', text: 'done' }] };
    });
    await server.connect(new StdioServerTransport());
  `;
  return ['--input-type=module', '-e', script, '--', mode];
}

/** An HTTP API without an OpenAPI document whose /endless answers forever; /openapi-3mb.json is a 3 MB document. */
async function startApi() {
  const http = createServer((req, res) => {
    if (req.url === '/openapi-3mb.json') {
      const paths = { '/x': { get: { description: 'x'.repeat(3_000_000), responses: {} } } };
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ openapi: '3.0.0', info: { title: 'big', version: '1' }, paths }));
    }
    if (req.url !== '/endless') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/plain' });
    const timer = setInterval(() => res.write('e'.repeat(64 * 1024)), 5);
    res.on('close', () => clearInterval(timer));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

const smallTool = (i: number): Tool => ({ name: `tool_${i}`, inputSchema: { type: 'object' } });

const MANY = 20;

/**
 * The model stand-in: calls `big__fetch` once (or, for the prompt "many fetches", MANY times in
 * one answer), then answers with what the first call gave.
 */
function model(prompt: string, request: ModelRequest): ModelReply {
  const toolMessage = request.body.messages.find((m) => m.role === 'tool');
  const times = prompt === 'many fetches' ? MANY : 1;
  if (!toolMessage && prompt === 'api endless')
    return { toolCalls: [{ name: 'big__http_request', arguments: { path: '/endless' } }] };
  if (!toolMessage)
    return { toolCalls: Array.from({ length: times }, () => ({ name: 'big__fetch', arguments: {} })) };
  return { content: `The tool said: ${(toolMessage.content ?? '').slice(0, 300)}` };
}

describe('MCP answers past the bounds', () => {
  let svc: TestService;
  let modelServer: ModelServer;
  // Each test's source is in an organization of its own (the slug "big" is taken once per organization).
  let org: Org;
  const servers: Array<{ close(): Promise<void> }> = [];

  before(async () => {
    ({ svc, model: modelServer } = await startWorkerService((prompt, _i, req) => model(prompt, req), {
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_STDIO_COMMANDS: 'node',
      PATH: NODE_DIR,
    }));
  });
  after(async () => {
    await svc?.close();
    await modelServer?.close();
    await Promise.all(servers.map((s) => s.close()));
  });

  /** A source for a new server with these tools; returns its id. */
  async function sourceFor(tools: Tool[], options: ServerOptions) {
    const server = await startServer(tools, options);
    servers.push(server);
    return sourceWith('mcp', { transport: 'http', url: server.url });
  }

  /** A source "big" of this type and config, in a new organization. */
  async function sourceWith(type: 'mcp' | 'api', config: Record<string, unknown>) {
    org = await svc.createOrg();
    await unlimited(svc, org);
    const source = await create(svc, org, 'sources', { type, name: 'Big', slug: 'big', config });
    return source.id as string;
  }

  async function testSource(id: string) {
    const res = await svc.call({ method: 'POST', url: `/api/svc/sources/${id}/test`, key: org.apiKey });
    assert.equal(res.status, 200, res.raw);
    return res.body as { success: boolean; message: string; tools?: unknown[] };
  }

  async function runWith(sourceId: string, prompt?: string) {
    const task = await newTask(svc, org, { sourceIds: [sourceId], ...(prompt && { prompt }) });
    return finishedRun(svc, org, await runNow(svc, org, task.id), 30_000);
  }

  test('a server listing 10,000 tools fails the test and the run, naming the limit of 256', async () => {
    const id = await sourceFor(
      Array.from({ length: 10_000 }, (_, i) => smallTool(i)),
      { json: true },
    );
    const result = await testSource(id);
    assert.equal(result.success, false, JSON.stringify(result).slice(0, 300));
    assert.match(result.message, /^source "Big": it offers more than 256 tools, the limit of a source$/);
    const run = await runWith(id);
    assert.equal(run.status, 'failed');
    assert.match(run.error, /more than 256 tools/);
  });

  for (const json of [true, false]) {
    test(`a tool with a 5 MB schema fails the test: the ${json ? 'JSON' : 'event-stream'} answer is not read past 4 MiB`, async () => {
      const id = await sourceFor([{ name: 'huge', inputSchema: schemaOf(5_000_000) }], { json });
      const started = performance.now();
      const result = await testSource(id);
      assert.equal(result.success, false, JSON.stringify(result).slice(0, 300));
      assert.match(result.message, /the server sent a message larger than 4 MiB/);
      // Not the connect time limit (15 s): the transport was closed when the bound was reached.
      assert.ok(performance.now() - started < 10_000);
    });
  }

  test('over WebSocket, a tool with a 5 MB schema fails the test, naming the 4 MiB bound', async () => {
    const server = await startWsServer([{ name: 'huge', inputSchema: schemaOf(5_000_000) }]);
    servers.push(server);
    org = await svc.createOrg();
    await unlimited(svc, org);
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Big',
      slug: 'big',
      config: { transport: 'websocket', url: server.url },
    });
    const result = await testSource(source.id);
    assert.equal(result.success, false, JSON.stringify(result).slice(0, 300));
    assert.match(result.message, /the server sent a message larger than 4 MiB/);
  });

  test('a tool with a 100 KB schema fails the test, naming the 64 KiB a tool may have', async () => {
    const id = await sourceFor([smallTool(1), { name: 'wide', inputSchema: schemaOf(100_000) }], {
      json: true,
    });
    const result = await testSource(id);
    assert.equal(result.success, false);
    assert.match(
      result.message,
      /its tool "wide" has a definition .* of \d+ bytes, more than the 64 KiB a tool may have/,
    );
  });

  test("tools adding up to more than 1 MiB fail the test, and the source's stored tools stay as they were", async () => {
    const tools = Array.from({ length: 20 }, (_, i) => ({ name: `t${i}`, inputSchema: schemaOf(60_000) }));
    const id = await sourceFor(tools, { json: true });
    const result = await testSource(id);
    assert.equal(result.success, false);
    assert.match(result.message, /add up to \d+ bytes, more than the 1 MiB a source's tools may have/);
    const stored = await svc.call({
      method: 'GET',
      url: `/api/svc/sources/${id}?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    assert.equal(stored.status, 200, stored.raw);
    assert.ok(!stored.body.tools?.length, 'no oversized tool list was stored');
  });

  test('tools over many pages stop being read once they pass 1 MiB together', async () => {
    const lists = { count: 0 };
    const page = Array.from({ length: 20 }, (_, i) => ({ name: `t${i}`, inputSchema: schemaOf(60_000) }));
    const id = await sourceFor(page, { json: true, pages: 64, lists });
    const result = await testSource(id);
    assert.equal(result.success, false);
    assert.match(result.message, /add up to \d+ bytes, more than the 1 MiB a source's tools may have/);
    assert.equal(lists.count, 1, 'no page read after the bound was passed');
  });

  test('a call answered with 10 MB fails promptly as the tool result, and the run completes', async () => {
    const id = await sourceFor([{ name: 'fetch', inputSchema: { type: 'object' } }], {
      json: false,
      callText: 'y'.repeat(10_000_000),
    });
    const run = await runWith(id);
    assert.equal(run.status, 'completed', JSON.stringify(run).slice(0, 500));
    assert.match(
      run.output,
      /^The tool said: Error: tool fetch failed: .*the server sent a message larger than 4 MiB/,
    );
  });

  test(`the results of ${MANY} calls in one answer are read 8 at a time and cut to 400,000 characters together`, async () => {
    const calls = { inFlight: 0, most: 0 };
    const id = await sourceFor([{ name: 'fetch', inputSchema: { type: 'object' } }], {
      json: true,
      callText: 'z'.repeat(100_000),
      // Long enough that 8 calls overlap on a busy machine (at 50 ms, CI saw 5 at once at most).
      callDelayMs: 400,
      calls,
    });
    const run = await runWith(id, 'many fetches');
    assert.equal(run.status, 'completed', JSON.stringify(run).slice(0, 500));
    assert.equal(calls.most, 8, 'at most 8 calls of one answer at once');
    const followUp = modelServer.requests.find(
      (r) =>
        r.body.messages.some((m) => m.role === 'user' && m.content === 'many fetches') &&
        r.body.messages.some((m) => m.role === 'tool'),
    );
    const results = followUp?.body.messages.filter((m) => m.role === 'tool') ?? [];
    assert.equal(results.length, MANY);
    const total = results.reduce((sum, m) => sum + (m.content ?? '').length, 0);
    // Each result is cut to an equal share, its marker (a few dozen characters) on top.
    assert.ok(total <= 400_000 + MANY * 64, `${total} characters of tool results`);
    for (const m of results) assert.match(m.content ?? '', /\n\[output cut at 20000 characters\]$/);
  });

  test('over stdio, a 5 MB line listing the tools fails the test, naming the 4 MiB bound', async () => {
    const id = await sourceWith('mcp', { command: 'node', args: stdioArgs('huge-schema') });
    const result = await testSource(id);
    assert.equal(result.success, false, JSON.stringify(result).slice(0, 300));
    assert.match(result.message, /the server sent a message line larger than 4 MiB/);
  });

  test('over stdio, a call that writes 70 MiB is stopped at 64 MiB and fails as the tool result', async () => {
    const id = await sourceWith('mcp', { command: 'node', args: stdioArgs('flood') });
    const run = await runWith(id);
    assert.equal(run.status, 'completed', JSON.stringify(run).slice(0, 500));
    assert.match(
      run.output,
      /^The tool said: Error: tool fetch failed: .*the server wrote more than 64 MiB to stdout/,
    );
  });

  test('an api source reads 1 MiB of an endless answer and the model reads 100,000 characters of it', async () => {
    const api = await startApi();
    servers.push(api);
    const id = await sourceWith('api', { baseUrl: api.url });
    const run = await runWith(id, 'api endless');
    assert.equal(run.status, 'completed', JSON.stringify(run).slice(0, 500));
    const followUp = modelServer.requests.find(
      (r) =>
        r.body.messages.some((m) => m.role === 'user' && m.content === 'api endless') &&
        r.body.messages.some((m) => m.role === 'tool'),
    );
    const result = followUp?.body.messages.find((m) => m.role === 'tool')?.content ?? '';
    assert.ok(result.startsWith('HTTP 200\neeee'), result.slice(0, 100));
    assert.ok(result.endsWith('\n[output cut at 100000 characters]'), result.slice(-100));
  });

  test('an api source whose OpenAPI document is over 2 MiB fails the test, naming the bound', async () => {
    const api = await startApi();
    servers.push(api);
    const id = await sourceWith('api', { baseUrl: api.url, openapiUrl: `${api.url}/openapi-3mb.json` });
    const result = await testSource(id);
    assert.equal(result.success, false, JSON.stringify(result).slice(0, 300));
    assert.match(result.message, /the OpenAPI document at .* cannot be used: it is larger than 2 MiB/);
  });

  /** Runs a task with one source per tool list, each its own server; the run and the model requests for it. */
  async function runWithSources(lists: Tool[][], prompt: string) {
    org = await svc.createOrg();
    await unlimited(svc, org);
    const sourceIds: string[] = [];
    for (const [i, tools] of lists.entries()) {
      const server = await startServer(tools, { json: true });
      servers.push(server);
      const source = await create(svc, org, 'sources', {
        type: 'mcp',
        name: `Source ${i}`,
        slug: `source-${i}`,
        config: { transport: 'http', url: server.url },
      });
      sourceIds.push(source.id);
    }
    const task = await newTask(svc, org, { sourceIds, prompt });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id), 30_000);
    const asked = modelServer.requests.filter((r) =>
      r.body.messages.some((m) => m.role === 'user' && m.content === prompt),
    );
    return { run, asked };
  }

  test('sources offering more than 512 tools together fail the run before the model is asked', async () => {
    const lists = [0, 1, 2].map(() => Array.from({ length: 200 }, (_, i) => smallTool(i)));
    const { run, asked } = await runWithSources(lists, 'six hundred tools');
    assert.equal(run.status, 'failed');
    assert.match(run.error, /offer 600 tools, more than the 512 a run can offer the model/);
    assert.equal(asked.length, 0);
  });

  test('sources whose tools take more than 4 MiB together fail the run before the model is asked', async () => {
    const lists = [0, 1, 2, 3, 4].map(() =>
      Array.from({ length: 15 }, (_, i) => ({ name: `t${i}`, inputSchema: schemaOf(60_000) })),
    );
    const { run, asked } = await runWithSources(lists, 'four and a half megabytes of tools');
    assert.equal(run.status, 'failed');
    assert.match(run.error, /take \d+ bytes, more than the 4 MiB a run can send the model/);
    assert.equal(asked.length, 0);
  });
});
