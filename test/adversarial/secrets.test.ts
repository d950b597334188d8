// Adversarial tests of the secrets of sources: config.env values and authConfig credentials
// (a header, a bearer token, a query key, Basic auth) reach the server they are meant for and
// nothing else. No API answer, dashboard page, log line, model request, webhook, e-mail, SMS or
// database row shows them, in clear, cut short or merely encoded. A sealed value copied onto
// another row does not open, and the service refuses to start with a wrong SVC_SECRET_KEY.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { LightMyRequestResponse } from 'fastify';
import type { Db } from '../../src/db/db.ts';
import { openPglite } from '../../src/db/pglite.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import { signIn } from '../../src/domain/users.ts';
import { SECRET_MASK } from '../../src/schemas/bounds.ts';
import { createPostgresDatabase, seededDataDir, TEST_DATABASE_URL } from '../helpers/db.ts';
import { freePort, startWebSocketMcpServer } from '../helpers/mcp-servers.ts';
import type { ModelReply, ModelRequest, ModelServer } from '../helpers/model-server.ts';
import { runFailingStart, type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService, unlimited } from '../helpers/runs.ts';
import { ADMIN_TOKEN, type CallOptions, type Reply, type TestService } from '../helpers/service.ts';
import { startSmsServer, type TestSmsServer } from '../helpers/sms-server.ts';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp.ts';
import { waitFor } from '../helpers/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';
import { allRows, databaseFiles, filesHolding } from './at-rest.ts';

// ---------------------------------------------------------------------------------------------
// Canaries and how a leak of one would look

/** A secret nobody could guess: `canary-<what>-<random hex>`. */
function canary(what: string, hexChars = 32): string {
  return `canary-${what}-${randomBytes(hexChars / 2).toString('hex')}`;
}

/** The random part of a canary. */
const randomPart = (secret: string) => secret.slice(secret.lastIndexOf('-') + 1);

/** The base64 (and base64url) forms the secret takes inside any longer encoded value. */
function base64Forms(secret: string): string[] {
  const forms: string[] = [];
  for (let shift = 0; shift < 3; shift++) {
    // The first and last groups depend on the neighbouring bytes; the middle does not.
    const b64 = Buffer.from(`${'x'.repeat(shift)}${secret}`)
      .toString('base64')
      .slice(4, -4);
    forms.push(b64, b64.replaceAll('+', '-').replaceAll('/', '_'));
  }
  return forms;
}

/**
 * What a leak of the secrets would look like in text: each whole, each 12-character piece of its
 * random part (a secret cut short still shows one), and its hex and base64 encodings (a secret
 * stored encoded rather than encrypted).
 */
function textPatterns(secrets: readonly string[]): string[] {
  const out = new Set<string>();
  for (const secret of secrets) {
    out.add(secret);
    const random = randomPart(secret);
    for (let i = 0; i + 12 <= random.length; i++) out.add(random.slice(i, i + 12));
    out.add(Buffer.from(secret).toString('hex'));
    for (const form of base64Forms(secret)) out.add(form);
  }
  return [...out];
}

/** Fewer patterns for raw files (tens of MB): each whole, both halves of its random part, its encodings. */
function filePatterns(secrets: readonly string[]): Buffer[] {
  const out = new Set<string>();
  for (const secret of secrets) {
    const random = randomPart(secret);
    out.add(secret);
    out.add(random.slice(0, random.length / 2));
    out.add(random.slice(random.length / 2));
    out.add(Buffer.from(secret).toString('hex'));
    for (const form of base64Forms(secret)) out.add(form);
  }
  return [...out].map((p) => Buffer.from(p));
}

function assertNoSecret(where: string, text: string, patterns: readonly string[]): void {
  const found = patterns.filter((p) => text.includes(p));
  assert.deepEqual(found, [], `${where} shows a secret (whole, in part or encoded)`);
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

// ---------------------------------------------------------------------------------------------
// Databases: every row of every table as text, and the raw files

// ---------------------------------------------------------------------------------------------
// The servers the sources point at

interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

async function listen(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A third-party HTTP API: /v1 takes a key in the `key` query parameter (any of `keys`), /basic
 * takes Basic auth. It never echoes a credential in a body; /v1/redirect sends the caller to a
 * pre-signed link elsewhere, with the key in the Location, as some APIs do.
 */
async function startApiStandIn(keys: Set<string>, basicAuth: string, elsewhere: string) {
  const requests: Recorded[] = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const json = (status: number, value: unknown, headers: Record<string, string> = {}) =>
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));
    if (url.pathname.startsWith('/v1/')) {
      const key = url.searchParams.get('key');
      if (!key || !keys.has(key)) return json(401, { error: 'unknown key' });
      if (url.pathname === '/v1/items') return json(200, { items: ['apple', 'pear'] });
      if (url.pathname === '/v1/redirect') {
        return json(302, {}, { location: `${elsewhere}/landing?key=${key}&expires=60` });
      }
      return json(404, { error: 'not found' });
    }
    if (url.pathname.startsWith('/basic/')) {
      if (req.headers.authorization !== basicAuth) return json(401, { error: 'who are you?' });
      if (url.pathname === '/basic/whoami') return json(200, { user: 'known' });
      return json(404, { error: 'not found' });
    }
    return json(404, { error: 'not found' });
  });
  return { requests, ...(await listen(server)) };
}

/** A Streamable HTTP MCP server (stateless, built with the SDK) that wants `header: expected`. */
async function startHttpMcpServer(header: string, expected: string) {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer(async (req, res) => {
    seen.push(req.headers);
    if (req.headers[header] !== expected) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const mcp = new McpServer({ name: 'http-test', version: '1.0.0' });
    mcp.registerTool('ping', { description: 'Answers pong' }, async () => ({
      content: [{ type: 'text', text: 'pong' }],
    }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  });
  return { seen, ...(await listen(server)) };
}

const sdk = (path: string) => JSON.stringify(import.meta.resolve(`@modelcontextprotocol/sdk/${path}`));

/**
 * `node` arguments of a stdio MCP server whose one tool, `check`, says whether SECRET_TOKEN has
 * the given sha256: the test learns that the env arrived without the server ever showing it.
 */
function envCheckArgs(expectedSha256: string): string[] {
  const script = `
    import { createHash } from 'node:crypto';
    import { McpServer } from ${sdk('server/mcp.js')};
    import { StdioServerTransport } from ${sdk('server/stdio.js')};
    const server = new McpServer({ name: 'env-check', version: '1.0.0' });
    server.registerTool('check', { description: 'Checks the SECRET_TOKEN it was started with' }, async () => {
      const got = createHash('sha256').update(process.env.SECRET_TOKEN ?? '').digest('hex');
      return { content: [{ type: 'text', text: got === process.argv[1] ? 'env ok' : 'env wrong' }] };
    });
    await server.connect(new StdioServerTransport());`;
  return ['--input-type=module', '-e', script, expectedSha256];
}

/**
 * A stdio server that dumps its CRASH_SECRET onto stderr over and over, more than any excerpt
 * keeps, and dies: whatever piece of its stderr a message quotes, it is cut out of secrets.
 */
const CRASH_ARGS = [
  '-e',
  'process.stderr.write(String(process.env.CRASH_SECRET).repeat(100)); process.exit(3);',
];

/** The model: `use a__b {json}; c__d {json}` calls those tools at once, then reports their results. */
function scriptedModel(prompt: string, _index: number, request: ModelRequest): ModelReply {
  const results = request.body.messages.filter((m) => m.role === 'tool');
  if (results.length > 0) return { content: `Results:\n${results.map((m) => m.content).join('\n---\n')}` };
  const calls = /^use (.+)$/s.exec(prompt)?.[1];
  if (!calls) return {};
  return {
    toolCalls: calls.split(';').map((call) => {
      const [name = '', ...rest] = call.trim().split(' ');
      return { name, arguments: rest.join(' ') || '{}' };
    }),
  };
}

// ---------------------------------------------------------------------------------------------

describe('source secrets never leave the place they are for', () => {
  const secrets = {
    env: canary('env'),
    extraEnv: canary('extra-env'),
    httpHeader: canary('http-header'),
    wsBearer: canary('ws-bearer'),
    queryKey: canary('query-key'),
    user: canary('basic-user'),
    password: canary('basic-password'),
    // Long, so that any cut of the crashing server's stderr lands inside one.
    crash: canary('crash', 200),
    downKey: canary('down-key'),
    otherOrgKey: canary('other-org-key'),
    malformedBody: canary('malformed-body'),
    invalidBody: canary('invalid-body'),
  };
  const basicAuth = `Basic ${Buffer.from(`${secrets.user}:${secrets.password}`).toString('base64')}`;
  // The secrets, and the Basic header value built from two of them.
  const patterns = [...textPatterns(Object.values(secrets)), basicAuth.slice(6)];

  let svc: TestService;
  let model: ModelServer;
  let api: Awaited<ReturnType<typeof startApiStandIn>>;
  let httpMcp: Awaited<ReturnType<typeof startHttpMcpServer>>;
  let ws: Awaited<ReturnType<typeof startWebSocketMcpServer>>;
  let hooks: WebhookReceiver;
  let smtp: TestSmtpServer;
  let sms: TestSmsServer;
  let org: Org;
  let other: Org;
  let elsewhere: string;
  const validKeys = new Set([secrets.queryKey, secrets.otherOrgKey]);
  /** Every answer of the service: method, URL, status, headers and body. */
  const answers: string[] = [];
  const ids: Record<string, string> = {};
  const runIds: string[] = [];

  const call = async (o: CallOptions): Promise<Reply> => {
    const res = await svc.call(o);
    answers.push(`${o.method} ${o.url} -> ${res.status}\n${JSON.stringify(res.headers)}\n${res.raw}`);
    return res;
  };
  const as = (who: Org, method: CallOptions['method'], url: string, body?: unknown) =>
    call({ method, url, key: who.apiKey, ...(body !== undefined && { body }) });
  const record = <T>(value: T): T => {
    answers.push(JSON.stringify(value));
    return value;
  };
  const settled = (who: Org, runId: string) =>
    waitFor(`the deliveries of run ${runId}`, async () => {
      const res = await as(who, 'GET', `/api/svc/runs/${runId}`);
      return res.body.deliveryStatus !== undefined && res.body.deliveryStatus !== 'pending'
        ? res.body
        : undefined;
    });

  before(async () => {
    elsewhere = `http://127.0.0.1:${await freePort()}`;
    api = await startApiStandIn(validKeys, basicAuth, elsewhere);
    httpMcp = await startHttpMcpServer('x-canary-auth', secrets.httpHeader);
    ws = await startWebSocketMcpServer({ requiredBearer: secrets.wsBearer });
    hooks = await startWebhookReceiver();
    smtp = await startSmtpServer();
    sms = await startSmsServer();
    ({ svc, model } = await startWorkerService(scriptedModel, {
      SVC_LOG_LEVEL: 'trace',
      SVC_STDIO_COMMANDS: 'node[SECRET_TOKEN,CRASH_SECRET,EXTRA,TOKEN]',
      PATH: dirname(process.execPath),
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_SMTP_URL: smtp.url,
      SVC_EMAIL_FROM: 'Tasks <tasks@example.com>',
      SVC_SMS_API_BASE: sms.url,
      SVC_SMS_ACCOUNT_SID: 'AC0123456789abcdef',
      SVC_SMS_AUTH_TOKEN: 'sms-auth-token',
      SVC_SMS_FROM: '+15005550006',
      SVC_DELIVERY_RETRY_SCHEDULE: '100ms',
    }));
    org = await svc.createOrg('paid');
    other = await svc.createOrg('paid');
    await unlimited(svc, org);
    await unlimited(svc, other);
  });
  after(async () => {
    await svc?.close();
    for (const s of [model, api, httpMcp, ws, hooks, smtp, sms]) await s?.close();
  });

  /**
   * The scenario's steps, each run once, by whichever test needs it first: every test awaits the
   * steps it builds on, so any test passes alone, and in any order.
   */
  const once = <T>(step: () => Promise<T>) => {
    let done: Promise<T> | undefined;
    return () => {
      done ??= step();
      return done;
    };
  };

  /** The API sources whose sealed secrets the tests copy between rows, as they are created. */
  const apiSourceBodies = () => ({
    shop: {
      type: 'api',
      config: { baseUrl: `${api.url}/v1` },
      authType: 'query',
      authConfig: { headerName: 'key', apiKey: secrets.queryKey },
    },
    vault: {
      type: 'api',
      config: { baseUrl: `${api.url}/basic` },
      authType: 'basic',
      authConfig: { username: secrets.user, password: secrets.password },
    },
    mirror: {
      type: 'api',
      config: { baseUrl: `${api.url}/v1` },
      authType: 'query',
      authConfig: { headerName: 'key', apiKey: secrets.otherOrgKey },
    },
  });

  /** The sources of both organizations, created with their secrets; their ids in `ids`. */
  const sourcesMade = once(async () => {
    const sources: [string, Org, Record<string, unknown>][] = [
      [
        'env',
        org,
        {
          type: 'mcp',
          name: 'Env check',
          config: {
            transport: 'stdio',
            command: 'node',
            args: envCheckArgs(sha256(secrets.env)),
            env: { SECRET_TOKEN: secrets.env },
          },
        },
      ],
      [
        'web',
        org,
        {
          type: 'mcp',
          name: 'Web',
          config: { transport: 'http', url: `${httpMcp.url}/mcp` },
          authType: 'header',
          authConfig: { headerName: 'X-Canary-Auth', token: secrets.httpHeader },
        },
      ],
      [
        'ws',
        org,
        {
          type: 'mcp',
          name: 'Calculator',
          config: { transport: 'websocket', url: ws.url },
          authType: 'bearer',
          authConfig: { token: secrets.wsBearer },
        },
      ],
      ['shop', org, { name: 'Shop', ...apiSourceBodies().shop }],
      ['vault', org, { name: 'Vault', ...apiSourceBodies().vault }],
      [
        'crash',
        org,
        {
          type: 'mcp',
          name: 'Crashing server',
          config: {
            transport: 'stdio',
            command: 'node',
            args: CRASH_ARGS,
            env: { CRASH_SECRET: secrets.crash },
          },
        },
      ],
      [
        'down',
        org,
        {
          type: 'api',
          name: 'Down',
          config: { baseUrl: `http://127.0.0.1:${await freePort()}/v1` },
          authType: 'query',
          authConfig: { headerName: 'key', apiKey: secrets.downKey },
        },
      ],
      ['mirror', other, { name: 'Mirror', ...apiSourceBodies().mirror }],
    ];
    for (const [slug, who, body] of sources) {
      const res = await as(who, 'POST', '/api/svc/sources', {
        organizationId: who.organizationId,
        slug,
        ...body,
      });
      assert.equal(res.status, 201, res.raw);
      ids[slug] = res.body.id;
      for (const value of Object.values(res.body.config.env ?? {})) assert.equal(value, SECRET_MASK);
      for (const k of ['token', 'apiKey', 'username', 'password']) {
        if (res.body.authConfig?.[k] !== undefined) assert.equal(res.body.authConfig[k], SECRET_MASK);
      }
    }
    return sources;
  });

  /** Requests the service refuses, each carrying a secret (their answers and log lines must not quote it). */
  const refusalsSent = once(async () => {
    await sourcesMade();
    const unknownField = await as(org, 'POST', '/api/svc/sources', {
      organizationId: org.organizationId,
      type: 'mcp',
      name: 'Refused',
      config: { transport: 'stdio', command: 'node', env: { TOKEN: secrets.invalidBody } },
      authConfig: { token: secrets.invalidBody, unexpected: secrets.invalidBody },
    });
    assert.equal(unknownField.status, 400, unknownField.raw);
    const badName = await as(org, 'PATCH', `/api/svc/sources/${ids.env}`, {
      config: { transport: 'stdio', command: 'node', env: { 'NOT A NAME': secrets.invalidBody } },
    });
    assert.equal(badName.status, 400, badName.raw);
    const malformed = await call({
      method: 'POST',
      url: '/api/svc/sources',
      key: org.apiKey,
      headers: { 'content-type': 'application/json' },
      body: `{"organizationId":"${org.organizationId}","type":"api","name":"x","config":{"env":{"A":"${secrets.malformedBody}"}},}`,
    });
    assert.equal(malformed.status, 400, malformed.raw);
  });

  /** The connection test of every source (and the two that fail). */
  const connectionsTested = once(async () => {
    await sourcesMade();
    const testOf = async (slug: string, who = org) => {
      const res = await as(who, 'POST', `/api/svc/sources/${ids[slug]}/test`);
      assert.equal(res.status, 200, res.raw);
      return res.body as { success: boolean; message: string };
    };
    for (const slug of ['env', 'web', 'ws', 'shop', 'vault']) {
      const result = await testOf(slug);
      assert.equal(result.success, true, `${slug}: ${result.message}`);
    }
    assert.equal((await testOf('mirror', other)).success, true);

    // Each secret went where it belongs (so the checks below are not vacuous).
    assert.ok(
      httpMcp.seen.some((h) => h['x-canary-auth'] === secrets.httpHeader),
      'the header reached the MCP server',
    );
    assert.ok(
      ws.handshakes.some((h) => h.authorization === `Bearer ${secrets.wsBearer}`),
      'the bearer token reached the WebSocket server',
    );
    assert.ok(
      api.requests.some((r) => r.url.includes(`key=${secrets.queryKey}`)),
      'the query key reached the API',
    );
    assert.ok(
      api.requests.some((r) => r.headers.authorization === basicAuth),
      'Basic auth reached the API',
    );

    // The server that prints its secret on stderr and dies: the message quotes its stderr, blanked.
    const crash = await testOf('crash');
    assert.equal(crash.success, false);
    assert.match(crash.message, /Crashing server/);
    assert.match(crash.message, /exited with code 3/);
    assertNoSecret('the crashing server test', crash.message, patterns);
    const down = await testOf('down');
    assert.equal(down.success, false);
    assert.match(
      down.message,
      /could not reach http:\/\/127\.0\.0\.1:\d+\/v1\/openapi\.json \(ECONNREFUSED\)/,
    );

    assertNoSecret('the answers', answers.join('\n'), patterns);
  });

  /** A run that uses every secret where it belongs. */
  const goodRunDone = once(async () => {
    await sourcesMade();
    const task = record(
      await newTask(svc, org, {
        name: 'All sources',
        prompt:
          'use env__check {}; web__ping {}; ws__add {"a":2,"b":3}; shop__http_request {"path":"/items"}; ' +
          'shop__http_request {"path":"/redirect"}; vault__http_request {"path":"/whoami"}',
        sourceIds: ['env', 'web', 'ws', 'shop', 'vault'].map((s) => ids[s]),
        destinations: [
          { type: 'email', value: 'team@example.com' },
          { type: 'sms', value: '+14155550123' },
          { type: 'webhook', value: hooks.url },
        ],
      }),
    );
    const runId = await runNow(svc, org, task.id);
    runIds.push(runId);
    const run = record(await finishedRun(svc, org, runId, 30_000));
    assert.equal(run.status, 'completed', run.error);
    // The stdio server got its env (both values), the others their credentials.
    assert.match(run.output, /env ok/);
    assert.doesNotMatch(run.output, /env wrong/);
    for (const expected of ['pong', 'apple', '"user":"known"', '\n5\n'])
      assert.ok(run.output.includes(expected), expected);
    // The pre-signed Location is shown with the key blanked.
    assert.ok(
      run.output.includes(`Location: ${elsewhere}/landing?key=${SECRET_MASK}&expires=60`),
      run.output,
    );
    assertNoSecret('the run', JSON.stringify(run), patterns);
    assert.ok(model.requests.length >= 2);
    assertNoSecret('the model requests', JSON.stringify(model.requests), patterns);
  });

  /** Runs that fail at a source. */
  const failedRunsDone = once(async () => {
    await sourcesMade();
    for (const [slug, name] of [
      ['crash', /Crashing server/],
      ['down', /Down/],
    ] as const) {
      const task = record(
        await newTask(svc, org, {
          name: `Broken ${slug}`,
          prompt: `use ${slug}__anything {}`,
          sourceIds: [ids[slug]],
          destinations: [
            { type: 'email', value: 'team@example.com' },
            { type: 'sms', value: '+14155550123' },
            { type: 'webhook', value: hooks.url },
          ],
        }),
      );
      const runId = await runNow(svc, org, task.id);
      runIds.push(runId);
      const run = record(await finishedRun(svc, org, runId, 30_000));
      assert.equal(run.status, 'failed');
      assert.match(run.error, name);
      assertNoSecret(`the failed run of ${slug}`, JSON.stringify(run), patterns);
    }
  });

  test('create, read, list and update answer with masks, never with a secret', async () => {
    const sources = await sourcesMade();
    for (const [slug, who] of sources)
      assert.equal((await as(who, 'GET', `/api/svc/sources/${ids[slug]}`)).status, 200);
    assert.equal((await as(org, 'GET', `/api/svc/sources?organizationId=${org.organizationId}`)).status, 200);
    assert.equal(
      (await as(other, 'GET', `/api/svc/sources?organizationId=${other.organizationId}`)).status,
      200,
    );

    // Updates that keep the stored values with the mask and add a new one.
    const env = await as(org, 'PATCH', `/api/svc/sources/${ids.env}`, {
      config: {
        transport: 'stdio',
        command: 'node',
        args: envCheckArgs(sha256(secrets.env)),
        env: { SECRET_TOKEN: SECRET_MASK, EXTRA: secrets.extraEnv },
      },
    });
    assert.equal(env.status, 200, env.raw);
    assert.deepEqual(env.body.config.env, { SECRET_TOKEN: SECRET_MASK, EXTRA: SECRET_MASK });
    const vault = await as(org, 'PATCH', `/api/svc/sources/${ids.vault}`, {
      description: 'Keeps its credentials',
      authConfig: { username: SECRET_MASK, password: SECRET_MASK },
    });
    assert.equal(vault.status, 200, vault.raw);

    await refusalsSent();

    assertNoSecret('the answers', answers.join('\n'), patterns);
  });

  test('a connection test sends each secret to its server only, and its answer carries none', async () => {
    await connectionsTested();
  });

  test('a run uses every secret where it belongs; its output and the model requests hold none', async () => {
    await goodRunDone();
  });

  test('runs that fail at a source fail naming it, with no secret in the error', async () => {
    await failedRunsDone();
  });

  test('webhooks, e-mails and SMS of those runs carry no secret', async () => {
    await goodRunDone();
    await failedRunsDone();
    for (const runId of runIds) {
      const run = await settled(org, runId);
      assert.equal(run.deliveryStatus, 'delivered', JSON.stringify(run.deliveries));
    }
    assert.equal(hooks.requests.length, runIds.length);
    assert.ok(smtp.mails.length >= runIds.length);
    assert.ok(sms.requests.length >= runIds.length);
    assert.ok(
      hooks.requests.some((r) => r.body.includes('env ok')),
      'the webhook carries the output',
    );
    assertNoSecret('the webhooks', JSON.stringify(hooks.requests), patterns);
    assertNoSecret('the e-mails', smtp.mails.map((m) => m.raw).join('\n'), patterns);
    assertNoSecret('the SMS', JSON.stringify(sms.requests), patterns);
  });

  test('run and task listings carry no secret', async () => {
    await goodRunDone();
    await failedRunsDone();
    assert.equal((await as(org, 'GET', `/api/svc/runs?organizationId=${org.organizationId}`)).status, 200);
    assert.equal((await as(org, 'GET', `/api/svc/tasks?organizationId=${org.organizationId}`)).status, 200);
    for (const runId of runIds) assert.equal((await as(org, 'GET', `/api/svc/runs/${runId}`)).status, 200);
    const runs = await as(org, 'GET', `/api/svc/runs?organizationId=${org.organizationId}`);
    for (const run of runs.body) {
      assert.equal((await as(org, 'GET', `/api/svc/tasks/${run.taskId}/runs`)).status, 200);
    }
    assertNoSecret('the answers', answers.join('\n'), patterns);
  });

  test("the dashboard's source pages and its connection test show masks only", async () => {
    await sourcesMade();
    await goodRunDone();
    await failedRunsDone();
    const email = `owner-${randomBytes(4).toString('hex')}@example.com`;
    const password = 'correct horse battery staple';
    const user = await call({
      method: 'POST',
      url: `/api/admin/organizations/${org.organizationId}/users`,
      admin: true,
      body: { email, password },
    });
    assert.equal(user.status, 201, user.raw);
    const session = await signIn(svc.service.deps, { email, password });
    assert.ok(session);
    const cookie = `svc_session=${session.token}`;
    const pages: string[] = [];
    const get = async (url: string) => {
      const res = await svc.app.inject({ method: 'GET', url, headers: { cookie } });
      assert.equal(res.statusCode, 200, url);
      pages.push(res.body);
      return res.body;
    };
    await get('/dashboard/sources');
    for (const slug of ['env', 'web', 'ws', 'shop', 'vault', 'crash']) {
      await get(`/dashboard/sources/${ids[slug]}`);
      await get(`/dashboard/sources/${ids[slug]}/edit`);
    }
    assert.match(await get(`/dashboard/sources/${ids.env}/edit`), /SECRET_TOKEN=\*{8}/);
    for (const runId of runIds) await get(`/dashboard/runs/${runId}`);
    for (const slug of ['vault', 'crash']) {
      const res: LightMyRequestResponse = await svc.app.inject({
        method: 'POST',
        url: `/dashboard/sources/${ids[slug]}/test`,
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ _csrf: session.csrfToken }).toString(),
      });
      assert.equal(res.statusCode, 200);
      pages.push(res.body);
    }
    assertNoSecret('the dashboard', pages.join('\n'), patterns);
  });

  /**
   * Three sources of their own for a test that breaks them: Shop, Vault (both of `org`) and
   * Mirror (of `other`), with Shop's sealed secrets then copied onto the other two rows.
   */
  const brokenCopies = async (tag: string) => {
    const made: Record<'shop' | 'vault' | 'mirror', { id: string; name: string }> = {} as never;
    const bodies = apiSourceBodies();
    for (const [slot, who, body] of [
      ['shop', org, bodies.shop],
      ['vault', org, bodies.vault],
      ['mirror', other, bodies.mirror],
    ] as const) {
      const name = `${slot[0]?.toUpperCase()}${slot.slice(1)} ${tag}`;
      const res = await as(who, 'POST', '/api/svc/sources', {
        organizationId: who.organizationId,
        slug: `${slot}-${tag}`,
        name,
        ...body,
      });
      assert.equal(res.status, 201, res.raw);
      made[slot] = { id: res.body.id, name };
    }
    const db = svc.testDb.db;
    const [shop] = await db.query<{ secrets_sealed: string }>(
      'SELECT secrets_sealed FROM sources WHERE id = $1',
      [made.shop.id],
    );
    assert.ok(shop?.secrets_sealed);
    // Another organization's row, and another row of the same organization.
    for (const target of [made.mirror.id, made.vault.id])
      await db.query('UPDATE sources SET secrets_sealed = $2 WHERE id = $1', [target, shop.secrets_sealed]);
    return made;
  };

  test("a sealed value copied onto another organization's source (or another row) does not open", async () => {
    const copies = await brokenCopies('copied');
    const requestsBefore = api.requests.length;

    for (const [slot, who] of [
      ['mirror', other],
      ['vault', org],
    ] as const) {
      const tested = await as(who, 'POST', `/api/svc/sources/${copies[slot].id}/test`);
      assert.equal(tested.status, 200, tested.raw);
      assert.equal(tested.body.success, false);
      assert.match(tested.body.message, new RegExp(`"${copies[slot].name}" cannot be decrypted`));
    }
    const task = record(
      await newTask(svc, other, {
        prompt: 'use mirror-copied__http_request {"path":"/items"}',
        sourceIds: [copies.mirror.id],
      }),
    );
    const run = record(await finishedRun(svc, other, await runNow(svc, other, task.id), 30_000));
    assert.equal(run.status, 'failed');
    assert.match(run.error, /"Mirror copied" cannot be decrypted/);
    // Nothing was sent with the other organization's key, nor anything at all.
    assert.equal(api.requests.length, requestsBefore, 'no request to the API');
    assertNoSecret('the answers', answers.join('\n'), patterns);
  });

  test('a source whose sealed secrets do not open is repaired by sending its values again', async () => {
    const mirror = (await brokenCopies('repaired')).mirror.id;
    // The mask stands for a stored value that cannot be read: a clear 400, not a server error.
    const masked = await as(other, 'PATCH', `/api/svc/sources/${mirror}`, {
      authConfig: { headerName: 'key', apiKey: SECRET_MASK },
    });
    assert.equal(masked.status, 400, masked.raw);
    assert.equal(masked.body.error.code, 'validation_error');
    assert.match(masked.body.error.message, /cannot be decrypted/);
    assert.equal(masked.body.error.details[0].path, '/body/authConfig/apiKey');
    // A change that does not touch the secrets works as before.
    assert.equal((await as(other, 'PATCH', `/api/svc/sources/${mirror}`, { name: 'Mirror' })).status, 200);

    const fresh = canary('fresh-key');
    validKeys.add(fresh);
    const repaired = await as(other, 'PATCH', `/api/svc/sources/${mirror}`, {
      authConfig: { headerName: 'key', apiKey: fresh },
    });
    assert.equal(repaired.status, 200, repaired.raw);
    const tested = await as(other, 'POST', `/api/svc/sources/${mirror}/test`);
    assert.equal(tested.body.success, true, tested.body.message);
    assert.ok(api.requests.some((r) => r.url.includes(`key=${fresh}`)));
    assertNoSecret('the answers', answers.join('\n'), textPatterns([fresh]));
  });

  test('no log line carries a secret, even at the most verbose level', async () => {
    await goodRunDone();
    await failedRunsDone();
    await connectionsTested();
    await refusalsSent();
    const logs = svc.logs.join('');
    assert.match(logs, /"source test failed"/, 'the logs were captured');
    assert.match(logs, /"level":20/, 'debug lines were written');
    assertNoSecret('the logs', logs, patterns);
  });

  test('no model request carries a secret', async () => {
    await goodRunDone();
    assert.ok(
      model.requests.some((r) => JSON.stringify(r).includes('env ok')),
      'tool results reached the model',
    );
    assertNoSecret('the model requests', JSON.stringify(model.requests), patterns);
  });

  test('no row of any table holds a secret in clear or merely encoded', async () => {
    await sourcesMade();
    const rows = await allRows(svc.testDb.db);
    assert.match(rows, /v1\.[A-Za-z0-9_-]{40,}/, 'sealed values are there');
    assertNoSecret('the database', rows, patterns);
  });

  test('no answer of the service carried a secret', async () => {
    await refusalsSent();
    await connectionsTested();
    await goodRunDone();
    await failedRunsDone();
    // The answers of the steps awaited above at least (more when other tests ran before).
    assert.ok(answers.length > 20, `${answers.length} answers captured`);
    assertNoSecret('the answers', answers.join('\n'), patterns);
  });
});

// ---------------------------------------------------------------------------------------------

describe('secrets at rest and the secret key, with the service as a process', () => {
  const key = randomBytes(32).toString('base64');
  const secrets = { env: canary('at-rest-env'), queryKey: canary('at-rest-key') };
  const patterns = textPatterns(Object.values(secrets));
  let env: Record<string, string>;
  let dataDir: string | undefined;
  let cleanup: () => Promise<void>;
  let api: Awaited<ReturnType<typeof startApiStandIn>>;
  let running: ServerProcess | undefined;
  const output: string[] = [];
  const ids: Record<string, string> = {};
  let org: { organizationId: string; apiKey: string };

  const request = async (base: string, method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(base + path, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const raw = await res.text();
    output.push(raw);
    return { status: res.status, raw, body: raw ? JSON.parse(raw) : undefined };
  };
  const start = async () => {
    running = await startServerProcess(env);
    return running;
  };
  const stop = async (server: ServerProcess) => {
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0, server.stderr());
    output.push(server.stdout(), server.stderr());
    running = undefined;
  };
  /** The service's database, opened by the test while no process runs. */
  const openDatabase = async (): Promise<Db> =>
    env.DATABASE_URL ? openPostgres(env.DATABASE_URL, 1, () => undefined) : openPglite(dataDir ?? '');

  before(async () => {
    api = await startApiStandIn(new Set([secrets.queryKey]), 'unused', 'http://127.0.0.1:9');
    const base = {
      SVC_SECRET_KEY: key,
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_LOG_LEVEL: 'trace',
      SVC_CREATE_DEMO_ORG: 'false',
      SVC_STDIO_COMMANDS: 'node[SECRET_TOKEN]',
      SVC_ALLOW_PRIVATE_URLS: 'true',
      PATH: dirname(process.execPath),
    };
    if (TEST_DATABASE_URL) {
      const db = await createPostgresDatabase();
      env = { ...base, DATABASE_URL: db.url };
      cleanup = db.drop;
    } else {
      const dir = mkdtempSync(join(tmpdir(), 'svc-secrets-'));
      dataDir = await seededDataDir(dir);
      env = { ...base, SVC_DATA_DIR: dataDir };
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    }

    const server = await start();
    const created = await request(server.url, 'POST', '/api/admin/organizations', ADMIN_TOKEN, {
      name: 'At rest',
    });
    assert.equal(created.status, 201, created.raw);
    org = created.body;
    for (const [slug, body] of [
      [
        'env',
        {
          type: 'mcp',
          name: 'Env check',
          config: {
            transport: 'stdio',
            command: 'node',
            args: envCheckArgs(sha256(secrets.env)),
            env: { SECRET_TOKEN: secrets.env },
          },
        },
      ],
      [
        'shop',
        {
          type: 'api',
          name: 'Shop',
          config: { baseUrl: `${api.url}/v1` },
          authType: 'query',
          authConfig: { headerName: 'key', apiKey: secrets.queryKey },
        },
      ],
    ] as const) {
      const res = await request(server.url, 'POST', '/api/svc/sources', org.apiKey, {
        organizationId: org.organizationId,
        slug,
        ...body,
      });
      assert.equal(res.status, 201, res.raw);
      ids[slug] = res.body.id;
      const tested = await request(server.url, 'POST', `/api/svc/sources/${res.body.id}/test`, org.apiKey);
      assert.equal(tested.body.success, true, tested.raw);
    }
    await stop(server);
  });
  after(async () => {
    if (running) {
      running.child.kill('SIGKILL');
      await running.exited;
    }
    await api?.close();
    await cleanup?.();
  });

  test('the rows and the logs of the process hold no secret', async () => {
    const db = await openDatabase();
    try {
      const rows = await allRows(db);
      assert.match(rows, /v1\.[A-Za-z0-9_-]{40,}/);
      assertNoSecret('the database', rows, patterns);
    } finally {
      await db.close();
    }
    assertNoSecret('the process output', output.join('\n'), patterns);
  });

  test('the raw data files hold no secret', async (t) => {
    const files = await databaseFiles(dataDir, env.DATABASE_URL ?? '');
    if (typeof files === 'string') {
      t.skip(files);
      return;
    }
    assert.ok(files.length > 10, 'the data files were found');
    const total = files.reduce((n, f) => n + statSync(f).size, 0);
    assert.ok(total > 1_000_000, 'the data files hold data');
    assert.deepEqual(filesHolding(files, filePatterns(Object.values(secrets))), []);
  });

  test('a wrong SVC_SECRET_KEY (another valid key, or not a key) fails startup with one line', async () => {
    const malformed = [randomBytes(16).toString('base64'), `${key.slice(0, -4)}!!!!`];
    // Side by side: those that are not keys fail before the database is opened.
    const [other, ...notKeys] = await Promise.all(
      [randomBytes(32).toString('base64'), ...malformed].map((value) =>
        runFailingStart({ ...env, SVC_SECRET_KEY: value }),
      ),
    );
    assert.ok(other);
    assert.equal(other.code, 1);
    assert.equal(other.stderr.trim().split('\n').length, 1, other.stderr);
    assert.match(other.stderr, /SVC_SECRET_KEY is not the key this database was created with/);
    notKeys.forEach(({ code, stderr }, i) => {
      assert.equal(code, 1, malformed[i]);
      assert.equal(stderr.trim().split('\n').length, 1, stderr);
      assert.match(stderr, /SVC_SECRET_KEY must be 32 random bytes in base64/);
      assert.ok(!stderr.includes(malformed[i] ?? ''), 'the bad value is not repeated');
    });
  });

  test('without SVC_SECRET_KEY the service refuses to start rather than seal with a new key', async () => {
    const { SVC_SECRET_KEY: _, ...withoutKey } = env;
    const { code, stderr } = await runFailingStart(withoutKey);
    assert.equal(code, 1);
    assert.equal(stderr.trim().split('\n').length, 1, stderr);
    assert.match(stderr, /SVC_SECRET_KEY/);
  });

  test('with the right key the service starts and every secret still opens', async () => {
    const server = await start();
    try {
      for (const slug of ['env', 'shop']) {
        const tested = await request(server.url, 'POST', `/api/svc/sources/${ids[slug]}/test`, org.apiKey);
        assert.equal(tested.status, 200, tested.raw);
        assert.equal(tested.body.success, true, tested.raw);
      }
    } finally {
      await stop(server);
    }
    assertNoSecret('the process output', output.join('\n'), patterns);
  });
});
