// Adversarial: the SSRF guard on every outbound surface, configured as in production
// (SVC_ALLOW_PRIVATE_URLS=false): webhook deliveries, MCP sources over Streamable HTTP (and its
// SSE fallback) and WebSocket, api sources, the fetch_url tool, and redirects. Every URL aims at
// a loopback canary listener (its port), which must never see a connection.
//
// No real DNS: the guard's resolver is replaced (setOutboundNetwork). `localhost` answers
// loopback as the system would; `public.test` is a loopback server that the guard is told to
// take as a public host (the allowed first hop of the redirect tests); `rebind-*.test` answer a
// public address to the pre-request check and 127.0.0.1 to the connection (DNS rebinding);
// `mixed.test` answers a public and a loopback address. Any other name does not resolve.
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import { type AddressInfo, createServer as createNetServer, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type OutboundNetwork, type ResolveUse, setOutboundNetwork } from '../../src/lib/outbound.ts';
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
import { waitFor } from '../helpers/wait.ts';

/** A public address the stub answers to the check of a rebinding name; nothing ever dials it. */
const PUBLIC_ADDRESS = '93.184.215.14';
const PRIVATE_OR_LOOPBACK = /private or loopback address.*SVC_ALLOW_PRIVATE_URLS/;

// ---- the canary: a plain TCP listener on loopback (and on ::1 at the same port if it can) ----
let canaryConnections = 0;
const canaryServers: Server[] = [];
function listenCanary(host: string, port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const server = createNetServer((socket) => {
      canaryConnections++;
      socket.destroy();
    });
    server.once('error', () => resolve(undefined));
    server.listen(port, host, () => resolve(server));
  });
}
const assertCanaryUntouched = () =>
  assert.equal(canaryConnections, 0, 'the loopback canary must never be connected to');

// ---- the stub network ----
// Installed in the suite's before hook, not when the file is loaded: other test files may share
// the process (scripts/test.ts), and they resolve names with node:dns.
const resolutions: { host: string; use: ResolveUse }[] = [];
const stubNetwork: OutboundNetwork = {
  publicTestHosts: ['public.test'],
  async resolve(hostname, use) {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    resolutions.push({ host: name, use });
    if (name === 'localhost' || name.endsWith('.localhost')) {
      return [
        { address: '127.0.0.1', family: 4 },
        { address: '::1', family: 6 },
      ];
    }
    if (name === 'public.test') return [{ address: '127.0.0.1', family: 4 }];
    // One public and one loopback address: every address must be public.
    if (name === 'mixed.test') {
      return [
        { address: PUBLIC_ADDRESS, family: 4 },
        { address: '127.0.0.1', family: 4 },
      ];
    }
    if (/^rebind-[a-z0-9-]+\.test$/.test(name)) {
      return [use === 'check' ? { address: PUBLIC_ADDRESS, family: 4 } : { address: '127.0.0.1', family: 4 }];
    }
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  },
};

/** Whether a rebinding name was resolved for the check and then for the connection. */
const rebound = (host: string) =>
  ['check', 'connect'].every((use) => resolutions.some((r) => r.host === host && r.use === use));

/** Hosts that name loopback, private, link-local, metadata or reserved addresses, in many spellings. */
const PRIVATE_HOSTS = [
  '127.0.0.1',
  'localhost',
  'localhost.',
  'LocalHost',
  '[::1]',
  '2130706433',
  '0x7f.1',
  '0177.0.0.1',
  '127.1',
  '[::ffff:127.0.0.1]',
  '[::ffff:7f00:1]',
  '[::127.0.0.1]',
  '[::7f00:1]',
  '[::ffff:0:127.0.0.1]',
  '[64:ff9b::127.0.0.1]',
  '[2002:7f00:1::1]',
  '169.254.169.254',
  '10.0.0.1',
  '172.16.0.1',
  '192.168.1.1',
  '100.64.0.1',
  '0.0.0.0',
  '0',
  '[fd00::1]',
  '[fe80::1]',
];

// ---- the stand-in for a public host: redirects to wherever it is told ----
const publicSeen: string[] = [];
const publicServer = createHttpServer((req: IncomingMessage, res) => {
  const url = new URL(req.url ?? '/', 'http://public.test');
  publicSeen.push(`${req.method} ${url.pathname}`);
  req.resume();
  const to = url.searchParams.get('url');
  if (url.pathname === '/to' && to) {
    res.writeHead(Number(url.searchParams.get('status') ?? 302), { location: to }).end();
  } else if (url.pathname === '/sse' && to) {
    // An old HTTP+SSE MCP server whose endpoint event names another origin.
    if (req.method === 'POST') return void res.writeHead(405).end();
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(`event: endpoint\ndata: ${to}\n\n`);
  } else if (url.pathname.startsWith('/api/')) {
    // An API whose every path (its OpenAPI document too) redirects to the canary.
    res.writeHead(302, { location: `${canaryUrl('127.0.0.1')}${url.pathname}` }).end();
  } else {
    res.writeHead(404).end();
  }
});
// A WebSocket upgrade is answered with a redirect to the canary.
publicServer.on('upgrade', (req: IncomingMessage, socket) => {
  publicSeen.push(`UPGRADE ${req.url}`);
  socket.end(
    `HTTP/1.1 302 Found\r\nLocation: ws://127.0.0.1:${canaryPort}/mcp\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
  );
});

let canaryPort = 0;
let publicPort = 0;
const canaryUrl = (host: string, scheme = 'http') => `${scheme}://${host}:${canaryPort}`;
const publicUrl = (path: string) => `http://public.test:${publicPort}${path}`;
const redirectTo = (target: string, status = 302) =>
  publicUrl(`/to?status=${status}&url=${encodeURIComponent(target)}`);

/** Schemes other than http and https, aimed at the canary where they take a host. */
const otherSchemes = () => [
  'file:///etc/passwd',
  `gopher://127.0.0.1:${canaryPort}/_GET%20/`,
  `ftp://127.0.0.1:${canaryPort}/`,
  'data:text/plain,hello',
  'javascript:alert(1)',
  `dict://127.0.0.1:${canaryPort}/info`,
  `ldap://127.0.0.1:${canaryPort}/`,
];

// ---- the scripted model ----
const toolResults = (request: ModelRequest) => request.body.messages.filter((m) => m.role === 'tool');
const offered = (request: ModelRequest, tool: string) =>
  request.body.tools?.map((t) => t.function.name).find((n) => n.endsWith(`__${tool}`));

/** `fetch <json list of urls>`: calls fetch_url for each at once, then answers "done". */
function script(prompt: string, request: ModelRequest): ModelReply {
  const step = request.body.messages.filter((m) => m.role === 'assistant').length;
  const fetchList = /^fetch (.*)$/s.exec(prompt)?.[1];
  if (fetchList && step === 0) {
    const name = offered(request, 'fetch_url') ?? 'fetch_url';
    return { toolCalls: (JSON.parse(fetchList) as string[]).map((url) => ({ name, arguments: { url } })) };
  }
  const call = /^call (\S+) (.*)$/s.exec(prompt);
  if (call?.[1] && call[2] && step === 0) {
    return { toolCalls: [{ name: offered(request, call[1]) ?? call[1], arguments: call[2] }] };
  }
  return { content: step > 0 ? 'done' : 'nothing to do' };
}

describe('SSRF: every outbound surface refuses private targets (SVC_ALLOW_PRIVATE_URLS=false)', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;

  before(async () => {
    setOutboundNetwork(stubNetwork);
    const v4 = await listenCanary('127.0.0.1', 0);
    assert.ok(v4, 'the canary listens');
    canaryServers.push(v4);
    canaryPort = (v4.address() as AddressInfo).port;
    const v6 = await listenCanary('::1', canaryPort);
    if (v6) canaryServers.push(v6);
    await new Promise<void>((resolve) => publicServer.listen(0, '127.0.0.1', resolve));
    publicPort = (publicServer.address() as AddressInfo).port;
    ({ svc, model } = await startWorkerService((prompt, _i, request) => script(prompt, request), {
      SVC_ALLOW_PRIVATE_URLS: 'false',
      SVC_WORKER_CONCURRENCY: '16',
      SVC_ORG_CONCURRENCY: '16',
      SVC_DELIVERY_RETRY_SCHEDULE: '100ms',
      // One organization tries every outbound surface, with more sources than the default cap.
      SVC_MAX_SOURCES_PER_ORG: '500',
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc?.close();
    await model?.close();
    publicServer.closeAllConnections();
    await new Promise<void>((resolve) => publicServer.close(() => resolve()));
    for (const server of canaryServers) await new Promise<void>((resolve) => server.close(() => resolve()));
    setOutboundNetwork(undefined);
  });

  const testSource = (id: string) =>
    svc.call({ method: 'POST', url: `/api/svc/sources/${id}/test`, key: org.apiKey });
  const createSource = (body: Record<string, unknown>) =>
    svc.call({
      method: 'POST',
      url: '/api/svc/sources',
      key: org.apiKey,
      body: { organizationId: org.organizationId, ...body },
    });

  /** Runs one task per source at once; the finished runs, in order. */
  async function runEach(sourceIds: string[], prompt = 'use the source') {
    const runIds = await Promise.all(
      sourceIds.map(async (id) =>
        runNow(svc, org, (await newTask(svc, org, { prompt, sourceIds: [id] })).id),
      ),
    );
    return Promise.all(runIds.map((id) => finishedRun(svc, org, id, 30_000)));
  }

  /**
   * For each URL: a source of that kind is either refused at creation (a 400) or created, and
   * then both its test and a run with it fail as a refusal naming the private address.
   */
  async function assertSourcesRefused(
    kind: string,
    sources: { url: string; body: Record<string, unknown> }[],
  ) {
    const created: { url: string; id: string; name: string }[] = [];
    for (const [i, { url, body }] of sources.entries()) {
      const name = `${kind} ${i}`;
      const res = await createSource({ name, ...body });
      // Refusing such a URL when it is saved would do too; today it is decided when connecting.
      if (res.status === 400) continue;
      assert.equal(res.status, 201, `${url}: ${res.raw}`);
      const tested = await testSource(res.body.id);
      assert.equal(tested.status, 200, tested.raw);
      assert.equal(tested.body.success, false, `${url} must not connect`);
      assert.match(tested.body.message, PRIVATE_OR_LOOPBACK, url);
      created.push({ url, id: res.body.id, name });
    }
    const runs = await runEach(created.map((c) => c.id));
    runs.forEach((run, i) => {
      const { url, name } = created[i]!;
      assert.equal(run.status, 'failed', url);
      assert.ok(run.error.includes(`"${name}"`), `${url}: the error names the source: ${run.error}`);
      assert.match(run.error, PRIVATE_OR_LOOPBACK, url);
    });
    assertCanaryUntouched();
  }

  test('MCP Streamable HTTP sources on private addresses are refused at test and at run', async () => {
    await assertSourcesRefused(
      'mcp-http',
      PRIVATE_HOSTS.map((host) => {
        const url = `${canaryUrl(host)}/mcp`;
        return { url, body: { type: 'mcp', config: { transport: 'http', url } } };
      }),
    );
  });

  test('MCP WebSocket sources on private addresses are refused at test and at run', async () => {
    await assertSourcesRefused(
      'mcp-ws',
      PRIVATE_HOSTS.map((host) => {
        const url = `${canaryUrl(host, 'ws')}/mcp`;
        return { url, body: { type: 'mcp', config: { transport: 'websocket', url } } };
      }),
    );
  });

  test('api sources with a private baseUrl are refused at test and at run', async () => {
    await assertSourcesRefused(
      'api',
      PRIVATE_HOSTS.map((host) => {
        const url = `${canaryUrl(host)}/api`;
        return {
          url,
          body: { type: 'api', config: { baseUrl: url }, authType: 'bearer', authConfig: { token: 'tok' } },
        };
      }),
    );
  });

  test('an api source whose OpenAPI document is on a private address is refused', async () => {
    const res = await createSource({
      type: 'api',
      name: 'api with a private document',
      config: { baseUrl: publicUrl('/v1'), openapiUrl: `${canaryUrl('127.0.0.1')}/openapi.json` },
    });
    assert.equal(res.status, 201, res.raw);
    const tested = await testSource(res.body.id);
    assert.equal(tested.body.success, false);
    assert.match(tested.body.message, PRIVATE_OR_LOOPBACK);
    assertCanaryUntouched();
  });

  test('URLs with schemes other than http(s) and ws(s) are refused when a source is saved', async () => {
    for (const url of [...otherSchemes(), `ws://public.test:${publicPort}/`]) {
      for (const config of [
        { transport: 'http', url },
        { baseUrl: url },
        { baseUrl: publicUrl('/v1'), openapiUrl: url },
      ]) {
        const type = 'transport' in config ? 'mcp' : 'api';
        const res = await createSource({ type, name: `scheme ${url}`, config });
        assert.equal(res.status, 400, `${JSON.stringify(config)}: ${res.raw}`);
      }
    }
    for (const url of [...otherSchemes(), `http://public.test:${publicPort}/`]) {
      const res = await createSource({
        type: 'mcp',
        name: 'ws scheme',
        config: { transport: 'websocket', url },
      });
      assert.equal(res.status, 400, `${url}: ${res.raw}`);
    }
  });

  test('a stored URL with another scheme (written past the API) is still refused at connect', async () => {
    const kinds = [
      { key: 'url', body: { type: 'mcp', config: { transport: 'http', url: publicUrl('/mcp') } } },
      {
        key: 'url',
        body: { type: 'mcp', config: { transport: 'websocket', url: `ws://public.test:${publicPort}/` } },
      },
      { key: 'baseUrl', body: { type: 'api', config: { baseUrl: publicUrl('/v1') } } },
    ];
    for (const url of [
      'file:///etc/passwd',
      `gopher://127.0.0.1:${canaryPort}/_x`,
      'data:text/plain,hi',
      `http://127.0.0.1:${canaryPort}/`,
    ]) {
      for (const { key, body } of kinds) {
        const source = await create(svc, org, 'sources', { name: `stored ${key} ${url}`, ...body });
        await svc.testDb.db.query(
          `UPDATE sources SET config = jsonb_set(config, $2, to_jsonb($3::text)) WHERE id = $1`,
          [source.id, `{${key}}`, url],
        );
        const tested = await testSource(source.id);
        assert.equal(tested.body.success, false, `${key}=${url} must not connect`);
      }
    }
    assertCanaryUntouched();
  });

  test('fetch_url refuses private addresses, other schemes and redirects to them from a public host', async () => {
    const local = await create(svc, org, 'sources', {
      type: 'local',
      name: 'Built-in',
      slug: 'builtin',
      config: {},
    });
    const privateUrls = PRIVATE_HOSTS.map((host) => `${canaryUrl(host)}/page`);
    const redirectTargets = [
      ...privateUrls,
      'file:///etc/passwd',
      `gopher://127.0.0.1:${canaryPort}/_x`,
      `ftp://127.0.0.1:${canaryPort}/`,
      'data:text/plain,hello',
      `${canaryUrl('rebind-fetch-redirect.test')}/page`,
    ];
    const expected = new Map<string, RegExp>([
      ...privateUrls.map((u): [string, RegExp] => [u, PRIVATE_OR_LOOPBACK]),
      ...otherSchemes().map((u): [string, RegExp] => [u, /only http and https URLs|not a valid URL/]),
      [`${canaryUrl('rebind-fetch.test')}/page`, PRIVATE_OR_LOOPBACK],
      [`${canaryUrl('mixed.test')}/page`, PRIVATE_OR_LOOPBACK],
      ...redirectTargets.map((u): [string, RegExp] => [
        redirectTo(u),
        /private or loopback address|not allowed/,
      ]),
      // 307 keeps the method; a chain through the same public origin is checked at every hop.
      [redirectTo(`${canaryUrl('10.0.0.1')}/`, 307), PRIVATE_OR_LOOPBACK],
      [redirectTo(redirectTo(`${canaryUrl('[::ffff:7f00:1]')}/`)), PRIVATE_OR_LOOPBACK],
    ]);
    const seenBefore = publicSeen.length;
    const task = await newTask(svc, org, {
      prompt: `fetch ${JSON.stringify([...expected.keys()])}`,
      sourceIds: [local.id],
    });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id), 30_000);
    assert.equal(run.status, 'completed', run.error);
    const request = model.requests.find(
      (r) => r.body.messages.some((m) => m.content === task.prompt) && toolResults(r).length > 0,
    );
    assert.ok(request, 'the model got the tool results');
    const calls = request.body.messages.find((m) => m.role === 'assistant')?.tool_calls ?? [];
    assert.equal(calls.length, expected.size);
    const results = new Map(toolResults(request).map((m) => [m.tool_call_id, m.content ?? '']));
    for (const call of calls) {
      const { url } = JSON.parse(call.function.arguments) as { url: string };
      const text = results.get(call.id) ?? '';
      assert.match(text, /^Error: /, `${url} was refused: ${text}`);
      assert.match(text, expected.get(url)!, `${url}: ${text}`);
    }
    // The public host was reached (the first hop is allowed); what it pointed to was not.
    assert.ok(publicSeen.length - seenBefore >= redirectTargets.length + 3);
    assert.ok(rebound('rebind-fetch.test'), 'the rebinding name was checked, then refused at connect');
    assert.ok(rebound('rebind-fetch-redirect.test'));
    assertCanaryUntouched();
  });

  test('webhook deliveries to private addresses are refused and never retried', async () => {
    const urls = [
      ...PRIVATE_HOSTS.map((host) => `${canaryUrl(host)}/hooks`),
      `${canaryUrl('rebind-hook.test')}/hooks`,
    ];
    const tasks = [];
    for (let i = 0; i < urls.length; i += 15) {
      tasks.push(
        await newTask(svc, org, {
          destinations: urls.slice(i, i + 15).map((value) => ({ type: 'webhook', value })),
        }),
      );
    }
    const runs = await Promise.all(
      tasks.map(async (t) => settledRun(svc, org, await runNow(svc, org, t.id))),
    );
    const deliveries = runs.flatMap(
      (r) => r.deliveries as { value: string; status: string; error: string; attempts: unknown[] }[],
    );
    // A task delivers once per address (the host's letter case aside).
    assert.equal(deliveries.length, new Set(urls.map((u) => u.toLowerCase())).size);
    for (const d of deliveries) {
      assert.equal(d.status, 'failed', d.value);
      assert.match(d.error, PRIVATE_OR_LOOPBACK, d.value);
      assert.equal(d.attempts.length, 1, `${d.value}: a refusal is permanent`);
    }
    assert.ok(rebound('rebind-hook.test'));
    assertCanaryUntouched();
  });

  test('a webhook URL with another scheme is refused when the destination is saved', async () => {
    for (const value of otherSchemes()) {
      const res = await svc.call({
        method: 'POST',
        url: '/api/svc/tasks',
        key: org.apiKey,
        body: {
          organizationId: org.organizationId,
          name: 'Scheme',
          prompt: 'p',
          schedule: 'daily',
          destinations: [{ type: 'webhook', value }],
        },
      });
      assert.equal(res.status, 400, `${value}: ${res.raw}`);
    }
  });

  test('a webhook receiver on a public host that redirects to a private one is not followed', async () => {
    const seenBefore = publicSeen.length;
    const task = await newTask(svc, org, {
      destinations: [
        { type: 'webhook', value: redirectTo(`${canaryUrl('127.0.0.1')}/hooks`) },
        { type: 'webhook', value: redirectTo(`${canaryUrl('localhost')}/hooks`, 307) },
      ],
    });
    const run = await settledRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.deliveryStatus, 'failed');
    for (const d of run.deliveries) {
      assert.match(d.error, /redirects are not followed/);
      for (const attempt of d.attempts)
        assert.equal(attempt.statusCode === 302 || attempt.statusCode === 307, true);
    }
    assert.ok(publicSeen.slice(seenBefore).every((r) => r === 'POST /to'));
    assert.ok(publicSeen.length > seenBefore, 'the public host got the delivery');
    assertCanaryUntouched();
  });

  test('MCP and api sources on a public host that redirects or rebinds to a private one do not connect', async () => {
    const seenBefore = publicSeen.length;
    const cases = [
      // Streamable HTTP: the initialize POST is redirected (302 and 307) to the canary.
      { type: 'mcp', config: { transport: 'http', url: redirectTo(`${canaryUrl('127.0.0.1')}/mcp`) } },
      { type: 'mcp', config: { transport: 'http', url: redirectTo(`${canaryUrl('localhost')}/mcp`, 307) } },
      // The older SSE transport: the endpoint event names the canary.
      {
        type: 'mcp',
        config: {
          transport: 'http',
          url: publicUrl(`/sse?url=${encodeURIComponent(`${canaryUrl('127.0.0.1')}/message`)}`),
        },
      },
      // WebSocket: the upgrade is answered with a redirect to the canary.
      { type: 'mcp', config: { transport: 'websocket', url: `ws://public.test:${publicPort}/mcp` } },
      // api: the document, and an explicit one, redirect to the canary.
      { type: 'api', config: { baseUrl: publicUrl('/api'), openapiUrl: publicUrl('/api/openapi.json') } },
    ];
    for (const [i, body] of cases.entries()) {
      const source = await create(svc, org, 'sources', { name: `redirecting ${i}`, ...body });
      const tested = await testSource(source.id);
      assert.equal(tested.body.success, false, `${JSON.stringify(body)} must not connect`);
    }
    assert.ok(publicSeen.length - seenBefore >= cases.length, 'the public host was reached each time');

    const rebinding = [
      { type: 'mcp', config: { transport: 'http', url: `${canaryUrl('rebind-mcp.test')}/mcp` } },
      { type: 'mcp', config: { transport: 'websocket', url: `${canaryUrl('rebind-ws.test', 'ws')}/mcp` } },
      { type: 'api', config: { baseUrl: `${canaryUrl('rebind-api.test')}/v1` } },
    ];
    const ids: string[] = [];
    for (const [i, body] of rebinding.entries()) {
      const source = await create(svc, org, 'sources', { name: `rebinding ${i}`, ...body });
      const tested = await testSource(source.id);
      assert.equal(tested.body.success, false);
      assert.match(tested.body.message, PRIVATE_OR_LOOPBACK);
      ids.push(source.id);
    }
    for (const run of await runEach(ids)) {
      assert.equal(run.status, 'failed');
      assert.match(run.error, PRIVATE_OR_LOOPBACK);
    }
    for (const host of ['rebind-mcp.test', 'rebind-ws.test', 'rebind-api.test'])
      assert.ok(rebound(host), host);
    assertCanaryUntouched();
  });

  test('an api source on a public host: a redirect of the model request to a private host is not followed', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'api',
      name: 'Redirecting API',
      slug: 'redirecting',
      config: { baseUrl: publicUrl('/api') },
      authType: 'bearer',
      authConfig: { token: 'api-token-that-stays-home' },
    });
    const tested = await testSource(source.id);
    assert.equal(tested.body.success, true, 'without a usable document the source offers http_request');
    const task = await newTask(svc, org, {
      prompt: 'call http_request {"path":"/steal"}',
      sourceIds: [source.id],
    });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id), 30_000);
    assert.equal(run.status, 'completed', run.error);
    const request = model.requests.find(
      (r) => r.body.messages.some((m) => m.content === task.prompt) && toolResults(r).length > 0,
    );
    const result = request ? (toolResults(request)[0]?.content ?? '') : '';
    assert.match(result, /^HTTP 302\nLocation: http:\/\/127\.0\.0\.1:\d+\/api\/steal/);
    assertCanaryUntouched();
  });

  test('across the whole file, the loopback canary saw no connection', () => {
    assertCanaryUntouched();
  });
});

/** The run once its deliveries are settled (deliveryStatus no longer pending). */
async function settledRun(svc: TestService, org: Org, runId: string) {
  await finishedRun(svc, org, runId, 30_000);
  return waitFor(
    `run ${runId} deliveries to settle`,
    async () => {
      const res = await svc.call({ method: 'GET', url: `/api/svc/runs/${runId}`, key: org.apiKey });
      return res.body.deliveryStatus !== 'pending' ? res.body : undefined;
    },
    { timeoutMs: 30_000 },
  );
}
