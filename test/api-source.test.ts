import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import { outboundFetch } from '../src/lib/outbound.ts';
import { connectApiSource } from '../src/runner/tools/api-source.ts';
import type { ConnectOptions, SourceToConnect, ToolConnection } from '../src/runner/tools/types.ts';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A local HTTP server that records every request and answers with `handler`. */
async function serve(handler: (req: Seen, res: ServerResponse) => void) {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      const entry = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      seen.push(entry);
      handler(entry, res);
    });
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const DOC = {
  openapi: '3.0.3',
  info: { title: 'Items', version: '1' },
  // Never used: requests go to the source's baseUrl.
  servers: [{ url: 'http://evil.invalid/' }],
  paths: {
    '/items/{itemId}': {
      parameters: [{ $ref: '#/components/parameters/ItemId' }],
      get: {
        operationId: 'getItem',
        summary: 'Get an item',
        parameters: [{ name: 'verbose', in: 'query', schema: { type: 'boolean' } }],
      },
      put: {
        operationId: 'updateItem',
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Item' } } },
        },
      },
      delete: { summary: 'Delete an item' },
    },
    '/items': { get: { operationId: 'getItem', summary: 'List items' } },
    '/tree': {
      post: {
        operationId: 'tree',
        requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/Node' } } } },
      },
    },
  },
  components: {
    parameters: { ItemId: { name: 'itemId', in: 'path', required: true, schema: { type: 'string' } } },
    schemas: {
      Item: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      Node: {
        type: 'object',
        properties: { children: { type: 'array', items: { $ref: '#/components/schemas/Node' } } },
      },
    },
  },
};

/** A document with more operations than a source offers as tools. */
const MANY = {
  openapi: '3.1.0',
  info: { title: 'Many', version: '1' },
  paths: Object.fromEntries(
    Array.from({ length: 200 }, (_, i) => [`/op${i}`, { get: { operationId: `op${i}` } }]),
  ),
};

const TOKEN = 'tok-canary-51c2';

const source = (
  config: Record<string, unknown>,
  authType: string | null = null,
  authConfig: SourceToConnect['authConfig'] = null,
  credentials: SourceToConnect['secrets']['credentials'] = {},
): SourceToConnect => ({
  id: 'src-1',
  slug: 'items-api',
  name: 'Items API',
  type: 'api',
  config,
  authType,
  authConfig,
  secrets: { env: {}, credentials },
});

const options = (allowPrivateUrls = true): ConnectOptions => ({
  config: { stdioCommands: [], stdioSearchPath: '', allowPrivateUrls },
  fetch: outboundFetch({ allowPrivateUrls }),
  timeoutMs: 5000,
  signal: new AbortController().signal,
});

async function connect(src: SourceToConnect): Promise<ToolConnection> {
  const result = await connectApiSource(src, options());
  assert.ok(result.ok, result.ok ? '' : result.message);
  return result.connection;
}

describe('api sources', () => {
  let api: Awaited<ReturnType<typeof serve>>;
  let other: Awaited<ReturnType<typeof serve>>;
  const json = (res: ServerResponse, status: number, value: unknown) =>
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));

  // Servers start as the suite is defined (so their `after` hooks belong to it).
  const otherServer = serve((_req, res) => res.writeHead(200).end('other origin'));
  const apiServer = serve((req, res) => {
    const path = req.url.split('?')[0] ?? '';
    if (path === '/api/v1/openapi.json' || path === '/specs/items.json') return json(res, 200, DOC);
    if (path === '/many/openapi.json') return json(res, 200, MANY);
    if (path === '/locked/openapi.json') return json(res, 401, { error: 'unauthorized' });
    if (path === '/yaml/openapi.json')
      return res.writeHead(200, { 'content-type': 'text/yaml' }).end('openapi: 3.0.0\n');
    if (path.endsWith('/openapi.json') || path === '/specs/missing.json')
      return json(res, 404, { error: 'no such file' });
    if (path === '/bare/go-away') return res.writeHead(302, { location: `${other.url}/landing` }).end();
    if (path.endsWith('/missing')) return json(res, 404, { error: 'no such item' });
    return json(res, 200, { echo: req.method, url: req.url });
  });
  before(async () => {
    other = await otherServer;
    api = await apiServer;
  });
  beforeEach(() => {
    api.seen.length = 0;
    other.seen.length = 0;
  });

  test('an OpenAPI document gives one tool per operation with unique names and inlined schemas', async () => {
    const conn = await connect(source({ baseUrl: `${api.url}/api/v1` }));
    assert.deepEqual(
      conn.tools.map((t) => t.name),
      ['getItem', 'updateItem', 'delete_items_itemId', 'getItem_2', 'tree'],
    );
    const [get, put] = conn.tools;
    assert.match(get?.description ?? '', /Get an item[\s\S]*GET \/items\/\{itemId\}/);
    assert.deepEqual(get?.inputSchema, {
      type: 'object',
      properties: { itemId: { type: 'string' }, verbose: { type: 'boolean' } },
      required: ['itemId'],
    });
    assert.deepEqual(put?.inputSchema.required, ['itemId', 'body']);
    assert.deepEqual((put?.inputSchema.properties as any)?.body, {
      description: 'JSON request body',
      type: 'object',
      properties: { name: { type: 'string' } },
      required: ['name'],
    });
    // The recursive schema is cut, not expanded forever.
    assert.ok(JSON.stringify(conn.tools[4]?.inputSchema).length < 20_000);
  });

  test('an operation call fills in the path, query and JSON body, sends the bearer token and ignores servers', async () => {
    const conn = await connect(source({ baseUrl: `${api.url}/api/v1` }, 'bearer', null, { token: TOKEN }));
    assert.equal(api.seen[0]?.headers.authorization, `Bearer ${TOKEN}`, 'the document is fetched with auth');
    api.seen.length = 0;
    const put = await conn.call(
      'updateItem',
      { itemId: 'a b/c', body: { name: 'x' } },
      new AbortController().signal,
    );
    assert.ok(put.ok);
    assert.match(put.text, /^HTTP 200\n/);
    const get = await conn.call('getItem', { itemId: '7', verbose: true }, new AbortController().signal);
    assert.ok(get.ok);
    const [first, second] = api.seen;
    assert.equal(first?.method, 'PUT');
    assert.equal(first?.url, '/api/v1/items/a%20b%2Fc');
    assert.equal(first?.headers.authorization, `Bearer ${TOKEN}`);
    assert.equal(first?.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(first?.body ?? ''), { name: 'x' });
    assert.equal(second?.url, '/api/v1/items/7?verbose=true');
  });

  test('each auth type reaches the API as its header or query parameter', async () => {
    const cases: [
      string,
      SourceToConnect['authConfig'],
      SourceToConnect['secrets']['credentials'],
      (s: Seen) => unknown,
      unknown,
    ][] = [
      [
        'header',
        { headerName: 'X-Token', prefix: 'Token' },
        { token: TOKEN },
        (s) => s.headers['x-token'],
        `Token ${TOKEN}`,
      ],
      ['api_key', null, { apiKey: TOKEN }, (s) => s.headers['x-api-key'], TOKEN],
      [
        'basic',
        null,
        { username: 'ann', password: 'pw' },
        (s) => s.headers.authorization,
        `Basic ${Buffer.from('ann:pw').toString('base64')}`,
      ],
      [
        'query',
        { headerName: 'key' },
        { apiKey: TOKEN },
        (s) => new URL(s.url, api.url).searchParams.get('key'),
        TOKEN,
      ],
      ['query', null, { token: TOKEN }, (s) => new URL(s.url, api.url).searchParams.get('api_key'), TOKEN],
    ];
    for (const [authType, authConfig, credentials, read, expected] of cases) {
      api.seen.length = 0;
      const conn = await connect(source({ baseUrl: `${api.url}/api/v1` }, authType, authConfig, credentials));
      const out = await conn.call('getItem', { itemId: '1' }, new AbortController().signal);
      assert.ok(out.ok, authType);
      assert.equal(api.seen.length, 2);
      for (const seen of api.seen) assert.equal(read(seen), expected, `${authType} on ${seen.url}`);
    }
  });

  test('a document with more than 128 operations gives the first 128 as tools', async () => {
    const conn = await connect(source({ baseUrl: `${api.url}/many` }));
    assert.equal(conn.tools.length, 128);
    assert.equal(conn.tools.at(-1)?.name, 'op127');
  });

  test('a path parameter cannot be empty or a dot segment that would name another resource', async () => {
    const conn = await connect(source({ baseUrl: `${api.url}/api/v1` }));
    api.seen.length = 0;
    for (const itemId of ['', '.', '..']) {
      const out = await conn.call('getItem', { itemId }, new AbortController().signal);
      assert.equal(out.ok, false, JSON.stringify(itemId));
    }
    assert.equal(api.seen.length, 0);
  });

  test('an error status of the API is a failed call with the status and the body', async () => {
    const conn = await connect(source({ baseUrl: `${api.url}/api/v1` }));
    const out = await conn.call('getItem', { itemId: 'missing' }, new AbortController().signal);
    assert.deepEqual(out, { ok: false, message: 'HTTP 404: {"error":"no such item"}' });
  });

  test('a call without a required argument fails without a request', async () => {
    const conn = await connect(source({ baseUrl: `${api.url}/api/v1` }));
    api.seen.length = 0;
    const out = await conn.call('updateItem', { itemId: '1' }, new AbortController().signal);
    assert.deepEqual(out, { ok: false, message: 'missing required argument(s): body' });
    assert.equal(api.seen.length, 0);
  });

  test('an explicit openapiUrl is used, and one that cannot be loaded fails the connection', async () => {
    const conn = await connect(
      source({ baseUrl: `${api.url}/api/v1`, openapiUrl: `${api.url}/specs/items.json` }),
    );
    assert.equal(conn.tools[0]?.name, 'getItem');
    const missing = await connectApiSource(
      source({ baseUrl: `${api.url}/api/v1`, openapiUrl: `${api.url}/specs/missing.json` }),
      options(),
    );
    assert.equal(missing.ok, false);
    assert.equal(!missing.ok && missing.errorType, 'protocol_error');
    assert.match(!missing.ok ? missing.message : '', /specs\/missing\.json cannot be used: HTTP 404/);
  });

  test('a document on another origin is fetched without the credentials', async () => {
    const result = await connectApiSource(
      source({ baseUrl: `${api.url}/api/v1`, openapiUrl: `${other.url}/spec.json` }, 'bearer', null, {
        token: TOKEN,
      }),
      options(),
    );
    assert.equal(result.ok, false, 'the other server answers text, not a document');
    assert.equal(other.seen[0]?.headers.authorization, undefined);
  });

  test('without a document (404 or YAML) the source offers http_request, confined to the base URL', async () => {
    for (const prefix of ['/bare', '/yaml']) {
      const conn = await connect(
        source({ baseUrl: `${api.url}${prefix}` }, 'bearer', null, { token: TOKEN }),
      );
      assert.deepEqual(
        conn.tools.map((t) => t.name),
        ['http_request'],
      );
    }
    const conn = await connect(source({ baseUrl: `${api.url}/bare/` }, 'bearer', null, { token: TOKEN }));
    api.seen.length = 0;
    const out = await conn.call(
      'http_request',
      { method: 'post', path: '/things?x=1', query: { y: '2' }, body: { a: 1 }, headers: { 'X-Trace': 't' } },
      new AbortController().signal,
    );
    assert.ok(out.ok);
    assert.equal(api.seen[0]?.method, 'POST');
    assert.equal(api.seen[0]?.url, '/bare/things?x=1&y=2');
    assert.equal(api.seen[0]?.headers.authorization, `Bearer ${TOKEN}`);
    assert.equal(api.seen[0]?.headers['x-trace'], 't');
    assert.deepEqual(JSON.parse(api.seen[0]?.body ?? ''), { a: 1 });
  });

  test('http_request refuses paths that leave the base URL and headers that would replace the auth', async () => {
    const conn = await connect(
      source({ baseUrl: `${api.url}/bare` }, 'header', { headerName: 'X-Token' }, { token: TOKEN }),
    );
    api.seen.length = 0;
    const signal = new AbortController().signal;
    for (const path of [
      '../secret',
      '/../secret',
      '%2e%2e/secret',
      'http://other.invalid/x',
      '//other.invalid/x',
      `${api.url}/barefoot`,
      `${other.url}/bare/x`,
    ]) {
      const out = await conn.call('http_request', { path }, signal);
      assert.equal(out.ok, false, path);
    }
    for (const header of ['Authorization', 'host', 'Cookie', 'x-token']) {
      const out = await conn.call('http_request', { path: '/x', headers: { [header]: 'v' } }, signal);
      assert.equal(out.ok, false, header);
    }
    assert.equal(api.seen.length, 0);
    assert.equal(other.seen.length, 0);
    const inside = await conn.call('http_request', { path: `${api.url}/bare/x` }, signal);
    assert.ok(inside.ok, 'an absolute URL under the base is fine');
  });

  test('a redirect to another origin is not followed, so the credentials stay with the API', async () => {
    const conn = await connect(
      source({ baseUrl: `${api.url}/bare` }, 'header', { headerName: 'X-Token' }, { token: TOKEN }),
    );
    const out = await conn.call('http_request', { path: '/go-away' }, new AbortController().signal);
    assert.deepEqual(out, { ok: true, text: `HTTP 302\nLocation: ${other.url}/landing\n` });
    assert.equal(other.seen.length, 0);
  });

  test('a loopback base URL is refused when private addresses are not allowed', async () => {
    const result = await connectApiSource(source({ baseUrl: `${api.url}/api/v1` }), options(false));
    assert.equal(result.ok, false);
    assert.equal(!result.ok && result.errorType, 'refused');
    assert.equal(api.seen.length, 0);
  });

  test('a 401 on the document is auth_failed, and the message holds no secret', async () => {
    const result = await connectApiSource(
      source({ baseUrl: `${api.url}/locked` }, 'bearer', null, { token: TOKEN }),
      options(),
    );
    assert.equal(!result.ok && result.errorType, 'auth_failed');
    assert.ok(!result.ok && !result.message.includes(TOKEN));
  });

  test('a token that is not a valid header value fails without showing the token', async () => {
    const result = await connectApiSource(
      source({ baseUrl: `${api.url}/api/v1` }, 'bearer', null, { token: `${TOKEN}\nx` }),
      options(),
    );
    assert.equal(result.ok, false);
    assert.ok(!result.ok && !result.message.includes(TOKEN), !result.ok ? result.message : '');
  });

  test('missing credentials or base URL are not_configured, a closed port is unreachable', async () => {
    const noToken = await connectApiSource(source({ baseUrl: `${api.url}/api/v1` }, 'bearer'), options());
    assert.equal(!noToken.ok && noToken.errorType, 'not_configured');
    const noBase = await connectApiSource(source({}), options());
    assert.equal(!noBase.ok && noBase.errorType, 'not_configured');
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const down = await connectApiSource(source({ baseUrl: `http://127.0.0.1:${port}/` }), options());
    assert.equal(!down.ok && down.errorType, 'unreachable');
  });
});
