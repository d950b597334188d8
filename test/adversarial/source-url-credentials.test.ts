// Adversarial: credentials written into a source's URL (`https://user:password@host`). The
// config of a source is not secret (every answer shows it), so such a URL is refused when
// saved, on every URL field, with a message that does not repeat it; nothing of it reaches the
// logs; and a row stored before the rule is shown with its user information masked.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type Reply, startTestService, type TestService } from '../helpers/service.ts';

const canary = () => `canary${randomBytes(12).toString('hex')}`;

describe('source URLs that carry credentials', () => {
  let svc: TestService;
  let org: { organizationId: string; apiKey: string };
  const seen: string[] = [];

  before(async () => {
    svc = await startTestService({ env: { SVC_LOG_LEVEL: 'trace' } });
    org = await svc.createOrg('paid');
  });
  after(() => svc.close());

  const send = (method: 'POST' | 'PATCH', url: string, body: unknown): Promise<Reply> =>
    svc.call({ method, url, key: org.apiKey, body });

  /** Each way of writing a credential into a URL, with the secret parts it holds. */
  function spellings(scheme: 'https' | 'wss') {
    const user = canary();
    const password = canary();
    const token = canary();
    seen.push(user, password, token);
    return [
      { url: `${scheme}://${user}:${password}@mcp.example.com/mcp`, secrets: [user, password] },
      { url: `${scheme}://${token}@mcp.example.com/mcp`, secrets: [token] },
      { url: `${scheme}://:${password}@mcp.example.com/`, secrets: [password] },
      { url: `${scheme}://${user}%3A${token}@mcp.example.com/`, secrets: [user, token] },
      { url: `${scheme}:\\\\${user}:${password}@mcp.example.com/`, secrets: [user, password] },
    ];
  }

  function assertRefused(res: Reply, path: string, secrets: string[], what: string) {
    assert.equal(res.status, 400, `${what}: ${res.raw}`);
    assert.equal(res.body.error.code, 'validation_error');
    assert.equal(res.body.error.details[0].path, path, what);
    // Spellings the URL format already refuses say so; the others are refused for the credential.
    assert.match(
      res.body.error.details[0].message,
      /user name or password|must match (format|pattern)/,
      what,
    );
    for (const secret of secrets)
      assert.ok(!res.raw.includes(secret), `${what}: the answer repeats a secret`);
  }

  test('every URL field of a source refuses a user name or password when created, without repeating it', async () => {
    for (const { url, secrets } of spellings('https')) {
      for (const [type, config, path] of [
        ['mcp', { transport: 'http', url }, '/body/config/url'],
        ['api', { baseUrl: url }, '/body/config/baseUrl'],
        ['api', { baseUrl: 'https://api.example.com', openapiUrl: url }, '/body/config/openapiUrl'],
        // Keys the type does not use are stored and shown as well.
        [
          'mcp',
          { transport: 'http', url: 'https://mcp.example.com/mcp', baseUrl: url },
          '/body/config/baseUrl',
        ],
        ['local', { baseUrl: url }, '/body/config/baseUrl'],
      ] as const) {
        const res = await send('POST', '/api/svc/sources', {
          organizationId: org.organizationId,
          type,
          name: 'With credentials',
          config,
        });
        assertRefused(res, path, secrets, `${type} ${path} ${url}`);
      }
      const icon = await send('POST', '/api/svc/sources', {
        organizationId: org.organizationId,
        type: 'api',
        name: 'Icon with credentials',
        config: { baseUrl: 'https://api.example.com' },
        iconUrl: url,
      });
      assertRefused(icon, '/body/iconUrl', secrets, `iconUrl ${url}`);
    }
    for (const { url, secrets } of spellings('wss')) {
      const res = await send('POST', '/api/svc/sources', {
        organizationId: org.organizationId,
        type: 'mcp',
        name: 'WebSocket with credentials',
        config: { transport: 'websocket', url },
      });
      assertRefused(res, '/body/config/url', secrets, `websocket ${url}`);
    }
    const list = await svc.call({
      method: 'GET',
      url: `/api/svc/sources?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    assert.equal(list.status, 200, list.raw);
    assert.equal(list.raw.includes('credentials'), false, 'nothing was stored');
  });

  test('a PATCH that puts credentials into a URL is refused and the stored source is unchanged', async () => {
    const created = await send('POST', '/api/svc/sources', {
      organizationId: org.organizationId,
      type: 'mcp',
      name: 'Clean',
      config: { transport: 'http', url: 'https://mcp.example.com/mcp' },
    });
    assert.equal(created.status, 201, created.raw);
    for (const { url, secrets } of spellings('https')) {
      const res = await send('PATCH', `/api/svc/sources/${created.body.id}`, {
        config: { transport: 'http', url },
      });
      assertRefused(res, '/body/config/url', secrets, `PATCH ${url}`);
    }
    const read = await svc.call({
      method: 'GET',
      url: `/api/svc/sources/${created.body.id}`,
      key: org.apiKey,
    });
    assert.equal(read.body.config.url, 'https://mcp.example.com/mcp');
  });

  test('a source stored with credentials in its URL before the rule is shown with them masked', async () => {
    const created = await send('POST', '/api/svc/sources', {
      organizationId: org.organizationId,
      type: 'api',
      name: 'Legacy',
      config: { baseUrl: 'https://api.example.com', openapiUrl: 'https://api.example.com/openapi.json' },
    });
    assert.equal(created.status, 201, created.raw);
    const user = canary();
    const password = canary();
    seen.push(user, password);
    await svc.testDb.db.query(`UPDATE sources SET config = $2::jsonb WHERE id = $1`, [
      created.body.id,
      JSON.stringify({
        baseUrl: `https://${user}:${password}@api.example.com/v1`,
        openapiUrl: `https://${password}@api.example.com/openapi.json`,
      }),
    ]);
    for (const url of [
      `/api/svc/sources/${created.body.id}`,
      `/api/svc/sources?organizationId=${org.organizationId}`,
    ]) {
      const res = await svc.call({ method: 'GET', url, key: org.apiKey });
      assert.equal(res.status, 200, res.raw);
      assert.ok(
        !res.raw.includes(user) && !res.raw.includes(password),
        `${url} shows the stored credentials`,
      );
    }
    const read = await svc.call({
      method: 'GET',
      url: `/api/svc/sources/${created.body.id}`,
      key: org.apiKey,
    });
    assert.equal(read.body.config.baseUrl, 'https://********@api.example.com/v1');
  });

  test('no log line holds any of the credentials', () => {
    assert.ok(seen.length > 0);
    const logs = svc.logs.join('');
    for (const secret of seen) assert.ok(!logs.includes(secret), 'a credential is in the logs');
  });
});
