import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { SourceRow } from '../src/db/sql/sources.ts';
import { openSourceSecrets } from '../src/domain/sources.ts';
import { assertValidation } from './helpers/assertions.ts';
import { resourceCalls, useTestService } from './helpers/fixtures.ts';

const MASK = '********';
const ENV_CANARY = 'env-canary-7f3a9c1e5b';
const TOKEN_CANARY = 'token-canary-2d8e4f6a0c';
const PASSWORD_CANARY = 'password-canary-9b1c3e5d7f';

function assertNoCanary(text: string, where: string) {
  for (const canary of [ENV_CANARY, TOKEN_CANARY, PASSWORD_CANARY]) {
    assert.ok(!text.includes(canary), `${where} contains a secret in clear`);
  }
}

describe('sources', () => {
  // The paid plan's 300 requests a minute leave room for every test below.
  const fx = useTestService({
    orgs: ['paid', 'paid'],
    env: { SVC_STDIO_COMMANDS: 'npx[API_TOKEN,KEEP,REPLACE,DROP,ADDED,NEVER_SET,A,B,K],node' },
  });
  const { create, list, get, patch, del } = resourceCalls(fx, 'sources');

  const row = async (id: string) => {
    const [r] = await fx.db.query<SourceRow>('SELECT * FROM sources WHERE id = $1', [id]);
    assert.ok(r, 'row exists');
    return r;
  };

  const stdio = (env: Record<string, string> = {}) => ({
    type: 'mcp',
    name: 'Files',
    config: { transport: 'stdio', command: 'npx', args: ['-y', '@acme/files-server'], env },
  });

  test('an mcp stdio source is created with its fields, inactive and without tools, and read back', async () => {
    const res = await create(fx.org, {
      ...stdio({ API_TOKEN: ENV_CANARY }),
      description: 'Reads files',
      iconUrl: 'https://example.com/files.png',
      authType: 'none',
      slug: 'files',
    });
    assert.equal(res.status, 201, res.raw);
    const source = res.body;
    assert.deepEqual(
      { ...source, id: undefined, createdAt: undefined, updatedAt: undefined },
      {
        id: undefined,
        organizationId: fx.org.organizationId,
        name: 'Files',
        slug: 'files',
        type: 'mcp',
        config: {
          transport: 'stdio',
          command: 'npx',
          args: ['-y', '@acme/files-server'],
          env: { API_TOKEN: MASK },
        },
        authType: 'none',
        description: 'Reads files',
        iconUrl: 'https://example.com/files.png',
        isActive: false,
        tools: [],
        createdAt: undefined,
        updatedAt: undefined,
      },
    );
    assert.deepEqual((await get(fx.org, source.id)).body, source);
  });

  const valid: [string, Record<string, unknown>, Record<string, unknown>][] = [
    [
      'an mcp http source',
      { type: 'mcp', config: { transport: 'http', url: 'https://mcp.example.com/mcp' } },
      { transport: 'http', url: 'https://mcp.example.com/mcp' },
    ],
    [
      'an mcp websocket source',
      { type: 'mcp', config: { transport: 'websocket', url: 'wss://mcp.example.com/ws' } },
      { transport: 'websocket', url: 'wss://mcp.example.com/ws' },
    ],
    [
      'an mcp source with a command and no transport (stdio inferred)',
      { type: 'mcp', config: { command: 'node', args: ['server.js'] } },
      { transport: 'stdio', command: 'node', args: ['server.js'] },
    ],
    [
      'an mcp source with a url and no transport (http inferred)',
      { type: 'mcp', config: { url: 'http://mcp.example.com' } },
      { transport: 'http', url: 'http://mcp.example.com' },
    ],
    [
      'an api source',
      { type: 'api', config: { baseUrl: 'https://api.example.com/v1' } },
      { baseUrl: 'https://api.example.com/v1' },
    ],
    ['a local source with an empty config', { type: 'local', config: {} }, {}],
  ];
  for (const [what, body, config] of valid) {
    test(`${what} is created with its config`, async () => {
      const res = await create(fx.org, { name: what, ...body });
      assert.equal(res.status, 201, res.raw);
      assert.equal(res.body.type, body.type);
      assert.deepEqual(res.body.config, config);
    });
  }

  const invalid: [string, Record<string, unknown>, string][] = [
    [
      'an mcp source with neither transport, command nor url',
      { type: 'mcp', config: {} },
      '/body/config/transport',
    ],
    [
      'an mcp stdio source without a command',
      { type: 'mcp', config: { transport: 'stdio' } },
      '/body/config/command',
    ],
    [
      'an mcp stdio source with a command the service does not allow',
      { type: 'mcp', config: { transport: 'stdio', command: 'bash' } },
      '/body/config/command',
    ],
    ['an mcp http source without a url', { type: 'mcp', config: { transport: 'http' } }, '/body/config/url'],
    [
      'an mcp http source with a websocket url',
      { type: 'mcp', config: { transport: 'http', url: 'wss://mcp.example.com' } },
      '/body/config/url',
    ],
    [
      'an mcp websocket source with an https url',
      { type: 'mcp', config: { transport: 'websocket', url: 'https://mcp.example.com' } },
      '/body/config/url',
    ],
    ['an api source without a baseUrl', { type: 'api', config: {} }, '/body/config/baseUrl'],
    [
      'an api source with an ftp baseUrl',
      { type: 'api', config: { baseUrl: 'ftp://files.example.com' } },
      '/body/config/baseUrl',
    ],
    [
      'an mcp source whose url is not a URL',
      { type: 'mcp', config: { url: 'not a url' } },
      '/body/config/url',
    ],
    [
      'an mcp source with an unknown transport',
      { type: 'mcp', config: { transport: 'carrier-pigeon' } },
      '/body/config/transport',
    ],
    ['a source with an unknown config key', { type: 'local', config: { shell: 'sh' } }, '/body/config/shell'],
    ['a source of an unknown type', { type: 'ftp', config: {} }, '/body/type'],
    ['a source without config', { type: 'local' }, '/body/config'],
    [
      'a source with an env value that is not a string',
      { type: 'local', config: { env: { A: 1 } } },
      '/body/config/env/A',
    ],
    ['a source with an unknown authType', { type: 'local', config: {}, authType: 'magic' }, '/body/authType'],
    [
      'a source with an unknown authConfig key',
      { type: 'local', config: {}, authConfig: { secret: 'x' } },
      '/body/authConfig/secret',
    ],
    ['a source with an unknown body field', { type: 'local', config: {}, tools: [] }, '/body/tools'],
    [
      'a source whose iconUrl is not http(s)',
      { type: 'local', config: {}, iconUrl: 'file:///etc/passwd' },
      '/body/iconUrl',
    ],
    [
      'a source with the mask as an env value (no stored value to keep)',
      { type: 'local', config: { env: { A: MASK } } },
      '/body/config/env/A',
    ],
  ];
  for (const [what, body, path] of invalid) {
    test(`creating ${what} is a 400 naming ${path}`, async () => {
      assertValidation(await create(fx.org, { name: 'Bad', ...body }), path);
    });
  }

  test('creating a source without a name is a 400 naming it', async () => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/svc/sources',
      key: fx.org.apiKey,
      body: { organizationId: fx.org.organizationId, type: 'local', config: {} },
    });
    assertValidation(res, '/body/name');
  });

  test('a PATCH is validated as the merged source: a stdio config without a command is refused', async () => {
    const { body: source } = await create(fx.org, stdio());
    assertValidation(
      await patch(fx.org, source.id, { config: { transport: 'stdio' } }),
      '/body/config/command',
    );
    assertValidation(
      await patch(fx.org, source.id, { config: { transport: 'http', url: 'ws://x.example.com' } }),
      '/body/config/url',
    );
    const ok = await patch(fx.org, source.id, { config: { url: 'https://mcp.example.com' } });
    assert.equal(ok.status, 200, ok.raw);
    assert.deepEqual(ok.body.config, { transport: 'http', url: 'https://mcp.example.com' });
  });

  test('secrets never appear in clear in responses, in the database row or in the logs', async () => {
    const created = await create(fx.org, {
      ...stdio({ API_TOKEN: ENV_CANARY }),
      name: 'Secretive',
      authType: 'basic',
      authConfig: { provider: 'acme', username: 'ada', password: PASSWORD_CANARY, token: TOKEN_CANARY },
    });
    assert.equal(created.status, 201, created.raw);
    assert.deepEqual(created.body.config.env, { API_TOKEN: MASK });
    assert.deepEqual(created.body.authConfig, {
      provider: 'acme',
      username: MASK,
      password: MASK,
      token: MASK,
    });
    const id = created.body.id;

    const replies = [
      created,
      await get(fx.org, id),
      await list(fx.org),
      await patch(fx.org, id, { name: 'Secretive 2', isActive: true }),
      await patch(fx.org, id, {
        config: { ...stdio().config, env: { API_TOKEN: MASK } },
        authConfig: { provider: 'acme', username: MASK, password: MASK, token: MASK },
      }),
    ];
    for (const res of replies) {
      assert.ok(res.status < 300, res.raw);
      assertNoCanary(res.raw, 'a response');
    }

    const [raw] = await fx.db.query('SELECT * FROM sources WHERE id = $1', [id]);
    assertNoCanary(JSON.stringify(raw), 'the database row');
    const stored = await row(id);
    assert.match(String(stored.secrets_sealed), /^v1\./);
    assert.deepEqual(openSourceSecrets(fx.svc.service.deps, stored), {
      env: { API_TOKEN: ENV_CANARY },
      credentials: { username: 'ada', password: PASSWORD_CANARY, token: TOKEN_CANARY },
    });

    assertNoCanary(fx.svc.logs.join(''), 'the logs');
  });

  test('a PATCH echoing the mask keeps the stored secret, a new value replaces it, an absent one is removed', async () => {
    const { body: source } = await create(fx.org, {
      ...stdio({ KEEP: 'keep-me', REPLACE: 'old-value', DROP: 'drop-me' }),
      name: 'Rotating',
      authType: 'bearer',
      authConfig: { token: 'old-token', apiKey: 'old-api-key' },
    });
    const res = await patch(fx.org, source.id, {
      config: { ...stdio().config, env: { KEEP: MASK, REPLACE: 'new-value', ADDED: 'added' } },
      authConfig: { token: 'new-token', headerName: 'X-Auth' },
    });
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body.config.env, { KEEP: MASK, REPLACE: MASK, ADDED: MASK });
    assert.deepEqual(res.body.authConfig, { headerName: 'X-Auth', token: MASK });
    assert.deepEqual(openSourceSecrets(fx.svc.service.deps, await row(source.id)), {
      env: { KEEP: 'keep-me', REPLACE: 'new-value', ADDED: 'added' },
      credentials: { token: 'new-token' },
    });

    // A PATCH without config or authConfig leaves every secret as it was.
    assert.equal((await patch(fx.org, source.id, { description: 'unchanged secrets' })).status, 200);
    assert.deepEqual(openSourceSecrets(fx.svc.service.deps, await row(source.id)).env.KEEP, 'keep-me');

    // null clears authConfig and its credentials.
    const cleared = await patch(fx.org, source.id, { authConfig: null, authType: null });
    assert.equal(cleared.status, 200, cleared.raw);
    assert.equal('authConfig' in cleared.body, false);
    assert.equal('authType' in cleared.body, false);
    assert.deepEqual(openSourceSecrets(fx.svc.service.deps, await row(source.id)).credentials, {});

    // The mask of a key that has no stored value is refused, and nothing changes.
    assertValidation(
      await patch(fx.org, source.id, { config: { ...stdio().config, env: { NEVER_SET: MASK } } }),
      '/body/config/env/NEVER_SET',
    );
    assert.deepEqual((await get(fx.org, source.id)).body.config.env, {
      KEEP: MASK,
      REPLACE: MASK,
      ADDED: MASK,
    });
  });

  test('a sealed secret copied into another source row fails to decrypt', async () => {
    const { body: a } = await create(fx.org, { ...stdio({ A: 'secret-a' }), name: 'A' });
    const { body: b } = await create(fx.org, { ...stdio({ B: 'secret-b' }), name: 'B' });
    await fx.db.query(
      'UPDATE sources SET secrets_sealed = (SELECT secrets_sealed FROM sources WHERE id = $1) WHERE id = $2',
      [a.id, b.id],
    );
    const copied = await row(b.id);
    assert.equal(copied.secrets_sealed, (await row(a.id)).secrets_sealed);
    assert.throws(() => openSourceSecrets(fx.svc.service.deps, copied));
    assert.deepEqual(openSourceSecrets(fx.svc.service.deps, await row(a.id)).env, { A: 'secret-a' });
  });

  test('isActive is false at creation and a PATCH sets it', async () => {
    const { body: source } = await create(fx.org, { type: 'local', name: 'Toggle', config: {} });
    assert.equal(source.isActive, false);
    const on = await patch(fx.org, source.id, { isActive: true });
    assert.equal(on.status, 200, on.raw);
    assert.equal(on.body.isActive, true);
    assert.equal((await get(fx.org, source.id)).body.isActive, true);
    assertValidation(await patch(fx.org, source.id, { isActive: 'yes' }), '/body/isActive');
    assertValidation(await patch(fx.org, source.id, { type: 'api' }), '/body/type');
  });

  test('slugs are generated from the name, and an explicit duplicate is a 409 naming it', async () => {
    const a = await create(fx.org, { type: 'local', name: 'Weather API', config: {} });
    const b = await create(fx.org, { type: 'local', name: 'Weather  API', config: {} });
    assert.equal(a.body.slug, 'weather-api');
    assert.equal(b.body.slug, 'weather-api-2');
    const dup = await create(fx.org, { type: 'local', name: 'Other', config: {}, slug: 'weather-api' });
    assert.equal(dup.status, 409, dup.raw);
    assert.equal(dup.body.error.code, 'conflict');
    assert.match(dup.body.error.message, /weather-api/);
    assertValidation(
      await create(fx.org, { type: 'local', name: 'x', config: {}, slug: 'Not A Slug' }),
      '/body/slug',
    );
  });

  test('the list shows only the own organization, newest first', async () => {
    const fresh = await fx.svc.createOrg();
    const ids: string[] = [];
    for (const name of ['one', 'two', 'three']) {
      ids.push((await create(fresh, { type: 'local', name, config: {} })).body.id);
      // createdAt has millisecond resolution: two sources of one millisecond are ordered by id.
      await new Promise((r) => setTimeout(r, 2));
    }
    await create(fx.other, { type: 'local', name: 'theirs', config: {} });
    const res = await list(fresh);
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.body.map((s: { id: string }) => s.id),
      ids.reverse(),
    );
  });

  test('testing a local source connects, stores its tools, marks it active, and answers 404 for another organization', async () => {
    const { body: source } = await create(fx.org, { type: 'local', name: 'Testable', config: {} });
    assert.equal(source.isActive, false);
    const own = await fx.svc.call({
      method: 'POST',
      url: `/api/svc/sources/${source.id}/test`,
      key: fx.org.apiKey,
    });
    assert.equal(own.status, 200, own.raw);
    assert.equal(own.body.success, true);
    const names = own.body.tools.map((t: { name: string }) => t.name).sort();
    assert.deepEqual(names, ['current_time', 'fetch_url']);
    const { body: read } = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/sources/${source.id}`,
      key: fx.org.apiKey,
    });
    assert.equal(read.isActive, true);
    assert.ok(read.lastConnectedAt, 'lastConnectedAt is set');
    assert.deepEqual(read.tools, own.body.tools);
    const theirs = await fx.svc.call({
      method: 'POST',
      url: `/api/svc/sources/${source.id}/test`,
      key: fx.other.apiKey,
    });
    assert.equal(theirs.status, 404, theirs.raw);
    assert.equal(theirs.body.error.code, 'not_found');
  });

  test("another organization's source answers 404 on get, patch and delete and stays unchanged", async () => {
    const { body: source } = await create(fx.org, { ...stdio({ K: 'v' }), name: 'Mine' });
    for (const res of [
      await get(fx.other, source.id),
      await patch(fx.other, source.id, { name: 'stolen', isActive: true }),
      await del(fx.other, source.id),
    ]) {
      assert.equal(res.status, 404, res.raw);
      assert.deepEqual(res.body, { error: { code: 'not_found', message: 'Source not found' } });
    }
    assert.deepEqual((await get(fx.org, source.id)).body, source);
  });

  test('a deleted source answers 204 with no body, then 404', async () => {
    const { body: source } = await create(fx.org, { type: 'local', name: 'Doomed', config: {} });
    const res = await del(fx.org, source.id);
    assert.equal(res.status, 204);
    assert.equal(res.raw, '');
    assert.equal((await get(fx.org, source.id)).status, 404);
    assert.equal((await del(fx.org, source.id)).status, 404);
  });
});
