// Adversarial tests of API keys: every refused key gets the very same 401 (nothing tells a
// malformed key from an unknown, revoked or expired one, or from another organization's), key
// values are kept nowhere (rows, data files, logs) but their hash and display prefix, and a
// revocation reaches every api process within seconds.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Db } from '../../src/db/db.ts';
import { openPglite } from '../../src/db/pglite.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import {
  DISPLAY_PREFIX_LENGTH,
  displayPrefix,
  generateApiKey,
  hashApiKey,
  KEY_PREFIX,
} from '../../src/domain/api-key-format.ts';
import { createPostgresDatabase, seededDataDir, TEST_DATABASE_URL } from '../helpers/db.ts';
import { useTestService } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { ADMIN_TOKEN, type CallOptions, type Reply } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';
import { allRows, databaseFiles } from './at-rest.ts';

const UNAUTHORIZED = { error: { code: 'unauthorized', message: 'Invalid or missing API key' } };
const RATE_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'];
const statusPath = (organizationId: string) => `/api/svc/billing/status?organizationId=${organizationId}`;

/** The key with its last character changed: the right shape, a wrong checksum. */
const badChecksum = (key: string) => `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;

/**
 * What a leak of these keys would look like in text: each whole, each 12-character piece of the
 * part after the display prefix (which is stored, and shown, on purpose), and its hex and base64
 * encodings.
 */
function keyPatterns(keys: readonly string[]): string[] {
  const out = new Set<string>();
  for (const key of keys) {
    out.add(key);
    const hidden = key.slice(DISPLAY_PREFIX_LENGTH);
    for (let i = 0; i + 12 <= hidden.length; i++) out.add(hidden.slice(i, i + 12));
    out.add(Buffer.from(key).toString('hex'));
    for (let shift = 0; shift < 3; shift++) {
      const b64 = Buffer.from(`${'x'.repeat(shift)}${key}`)
        .toString('base64')
        .slice(4, -4);
      out.add(b64);
      out.add(b64.replaceAll('+', '-').replaceAll('/', '_'));
    }
  }
  return [...out];
}

function assertNoKey(where: string, text: string, patterns: readonly string[]): void {
  const found = patterns.filter((p) => text.includes(p));
  assert.deepEqual(found, [], `${where} shows a key value (whole, in part or encoded)`);
}

// ---------------------------------------------------------------------------------------------
// Talking to a service process over HTTP: the admin API and the dashboard

async function adminCall(base: string, method: string, path: string, body?: unknown) {
  const res = await fetch(base + path, {
    method,
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const raw = await res.text();
  return { status: res.status, raw, body: raw ? JSON.parse(raw) : undefined };
}

async function statusWith(base: string, key: string, organizationId: string) {
  const res = await fetch(base + statusPath(organizationId), { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, raw: await res.text() };
}

const formToken = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
const cookieOf = (res: Response, name: string) =>
  res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0] ?? '')
    .find((c) => c.startsWith(`${name}=`));

interface Session {
  base: string;
  cookie: string;
  csrf: string;
}

/** Signs in through the dashboard's form, as a browser would. */
async function signInAt(base: string, email: string, password: string): Promise<Session> {
  const page = await fetch(`${base}/login`);
  const formCookie = cookieOf(page, 'svc_form');
  const token = formToken(await page.text());
  assert.ok(formCookie && token, 'the sign-in form');
  const res = await fetch(`${base}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: formCookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: token, email, password, next: '/dashboard/keys' }),
  });
  assert.equal(res.status, 303, await res.text());
  const cookie = cookieOf(res, 'svc_session');
  assert.ok(cookie, 'a session cookie');
  const keys = await fetch(`${base}/dashboard/keys`, { headers: { cookie } });
  const csrf = formToken(await keys.text());
  assert.ok(csrf, 'the keys page has its forms');
  return { base, cookie, csrf };
}

const dashboardPost = (s: Session, path: string, form: Record<string, string> = {}) =>
  fetch(s.base + path, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: s.cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: s.csrf, ...form }),
  });

/** A key created on the dashboard's keys page: its value, shown once, and its id. */
async function dashboardKey(s: Session, name: string): Promise<{ id: string; apiKey: string }> {
  const res = await dashboardPost(s, '/dashboard/keys', { name });
  const html = await res.text();
  assert.equal(res.status, 201, html.slice(0, 500));
  const apiKey = /id="key-value">(sats_[0-9A-Za-z]+)</.exec(html)?.[1];
  const id = new RegExp(`<td>${name}</td>[\\s\\S]*?/dashboard/keys/([0-9a-f-]{36})/revoke`).exec(html)?.[1];
  assert.ok(apiKey && id, 'the new key and its revoke form');
  return { id, apiKey };
}

/** A user of the organization (made by the operator), signed in to the dashboard. */
async function ownerSession(base: string, organizationId: string): Promise<Session> {
  const email = `owner-${randomBytes(4).toString('hex')}@example.com`;
  const password = 'correct horse battery staple';
  const user = await adminCall(base, 'POST', `/api/admin/organizations/${organizationId}/users`, {
    email,
    password,
  });
  assert.equal(user.status, 201, user.raw);
  return signInAt(base, email, password);
}

// ---------------------------------------------------------------------------------------------

describe('every refused key gets the same answer', () => {
  const fx = useTestService({ orgs: ['free', 'paid'], env: { SVC_LOG_LEVEL: 'trace' } });
  const keys: Record<string, string> = {};
  let clients = 0;

  /** A request from a client address of its own (so no address runs into its rate limit), with a fixed request id. */
  const send = (key: string | undefined, request: Pick<CallOptions, 'method' | 'url' | 'body'>) => {
    clients++;
    return fx.svc.call({
      ...request,
      ...(key !== undefined && { key }),
      headers: { 'x-request-id': 'probe' },
      remoteAddress: `10.77.${Math.floor(clients / 250)}.${(clients % 250) + 1}`,
    });
  };
  const newKey = async (name: string, expiresAt?: string) => {
    const res = await fx.svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${fx.org.organizationId}/keys`,
      admin: true,
      body: { name, ...(expiresAt && { expiresAt }) },
    });
    assert.equal(res.status, 201, res.raw);
    return res.body as { id: string; apiKey: string };
  };

  before(async () => {
    // Revoked after it was used (so any cache of this process knew it as valid).
    const revoked = await newKey('revoked');
    const statusOfOrg = { method: 'GET' as const, url: statusPath(fx.org.organizationId) };
    assert.equal((await send(revoked.apiKey, statusOfOrg)).status, 200);
    const gone = await fx.svc.call({ method: 'DELETE', url: `/api/admin/keys/${revoked.id}`, admin: true });
    assert.equal(gone.status, 204);
    await waitFor(
      'the revoked key to be refused',
      async () => ((await send(revoked.apiKey, statusOfOrg)).status === 401 ? true : undefined),
      { timeoutMs: 10_000, everyMs: 100 },
    );
    keys.revoked = revoked.apiKey;
    // Expired: its expiry moved into the past before it was ever used.
    const expired = await newKey('expired', new Date(Date.now() + 3_600_000).toISOString());
    await fx.db.query(`UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = $1`, [
      expired.id,
    ]);
    keys.expired = expired.apiKey;
    keys.neverIssued = generateApiKey();
  });

  const causes = (): [string, string | undefined][] => [
    ['no key at all', undefined],
    ['a malformed key', 'not-a-key'],
    ['a key with characters outside its alphabet', `${KEY_PREFIX}${'!'.repeat(36)}`],
    ['a valid key with one character more', `${fx.org.apiKey}x`],
    ['a key with a bad checksum', badChecksum(fx.org.apiKey)],
    ['a well-formed key never issued', keys.neverIssued],
    ['a revoked key', keys.revoked],
    ['an expired key', keys.expired],
    ["another organization's valid key", fx.other.apiKey],
  ];
  const endpoints = (): Pick<CallOptions, 'method' | 'url' | 'body'>[] => [
    { method: 'GET', url: statusPath(fx.org.organizationId) },
    { method: 'GET', url: `/api/svc/tasks?organizationId=${fx.org.organizationId}` },
    {
      method: 'POST',
      url: '/api/svc/tasks',
      body: { organizationId: fx.org.organizationId, name: 'Probe', prompt: 'Say hi', schedule: 'daily' },
    },
  ];

  /** Status, body and headers of a refusal; only the rate-limit values and the date may differ. */
  function refusal(res: Reply) {
    const headers: Record<string, unknown> = { ...res.headers };
    delete headers.date;
    for (const h of RATE_HEADERS) {
      assert.match(String(headers[h]), /^\d+$/, `${h} on a 401`);
      headers[h] = '(a number)';
    }
    return { status: res.status, headers, body: res.raw };
  }

  test("the organization's own key is accepted on each endpoint (the refusals below are about the key)", async () => {
    for (const endpoint of endpoints()) {
      const res = await send(fx.org.apiKey, endpoint);
      assert.ok(res.status === 200 || res.status === 201, `${endpoint.method} ${endpoint.url}: ${res.raw}`);
    }
  });

  test('malformed, bad-checksum, unknown, revoked, expired and foreign keys get one identical 401', async () => {
    let first: ReturnType<typeof refusal> | undefined;
    for (const endpoint of endpoints()) {
      for (const [cause, key] of causes()) {
        const res = await send(key, endpoint);
        assert.equal(res.status, 401, `${cause}, ${endpoint.method} ${endpoint.url}: ${res.raw}`);
        assert.deepEqual(res.body, UNAUTHORIZED, cause);
        const seen = refusal(res);
        first ??= seen;
        assert.deepEqual(
          seen,
          first,
          `${cause} on ${endpoint.method} ${endpoint.url} differs from the others`,
        );
      }
    }
  });

  test('a key anywhere but the Authorization header is not taken, and gets the same 401', async () => {
    const baseline = refusal(await send(undefined, endpoints()[0] ?? { method: 'GET', url: '/' }));
    const url = `${statusPath(fx.org.organizationId)}&api_key=${fx.org.apiKey}&key=${fx.org.apiKey}`;
    const inQuery = await fx.svc.call({
      method: 'GET',
      url,
      headers: { 'x-request-id': 'probe' },
      remoteAddress: '10.78.0.1',
    });
    const elsewhere = await fx.svc.call({
      method: 'GET',
      url: statusPath(fx.org.organizationId),
      headers: { 'x-request-id': 'probe', 'x-api-key': fx.org.apiKey, cookie: `api_key=${fx.org.apiKey}` },
      remoteAddress: '10.78.0.2',
    });
    assert.deepEqual(refusal(inQuery), baseline);
    assert.deepEqual(refusal(elsewhere), baseline);
  });

  test('a refused request changes nothing: the refused POSTs created no task', async () => {
    const tasks = await fx.db.query<{ organization_id: string }>(
      `SELECT organization_id FROM tasks WHERE name = 'Probe'`,
    );
    // Only the one the organization's own key created.
    assert.deepEqual(
      tasks.map((t) => t.organization_id),
      [fx.org.organizationId],
    );
  });

  test('no row of any table holds a key value, only its hash and display prefix', async () => {
    const issued = [fx.org.apiKey, fx.other.apiKey, keys.revoked ?? '', keys.expired ?? ''];
    const rows = await allRows(fx.db);
    for (const key of issued) {
      assert.ok(rows.includes(hashApiKey(key)), 'the hash is stored');
      assert.ok(rows.includes(displayPrefix(key)), 'the display prefix is stored');
    }
    const tried = causes().flatMap(([, key]) => (key === undefined ? [] : [key]));
    assertNoKey('the database', rows, [...keyPatterns(issued), ...tried]);
  });

  test('no log line holds a key value, refused or accepted, at the most verbose level', () => {
    const logs = fx.svc.logs.join('');
    assert.match(logs, /"status":401/, 'the refusals were logged');
    const tried = causes().flatMap(([, key]) => (key === undefined ? [] : [key]));
    assertNoKey('the logs', logs, [...keyPatterns([fx.org.apiKey, fx.other.apiKey]), ...tried]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('key values at rest, with the service as a process', () => {
  let env: Record<string, string>;
  let dataDir: string | undefined;
  let cleanup: () => Promise<void>;
  let running: ServerProcess | undefined;
  let output = '';
  const used: string[] = [];
  const tried: string[] = [];

  before(async () => {
    const base = { SVC_ADMIN_TOKEN: ADMIN_TOKEN, SVC_LOG_LEVEL: 'trace', SVC_CREATE_DEMO_ORG: 'true' };
    if (TEST_DATABASE_URL) {
      const db = await createPostgresDatabase();
      env = { ...base, DATABASE_URL: db.url, SVC_SECRET_KEY: randomBytes(32).toString('base64') };
      cleanup = db.drop;
    } else {
      const dir = mkdtempSync(join(tmpdir(), 'svc-keys-'));
      dataDir = await seededDataDir(dir);
      env = { ...base, SVC_DATA_DIR: dataDir };
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    }
    const server = await startServerProcess(env);
    running = server;
    // Keys made every way there is: the demo organization's, the operator's (with the
    // organization and on its own), and one a person makes on the dashboard.
    const banner = await server.waitForStdout(/API key: +sats_\w+\n/);
    const demoKey = /API key: +(sats_\w+)/.exec(banner)?.[1];
    assert.ok(demoKey);
    const org = await adminCall(server.url, 'POST', '/api/admin/organizations', { name: 'Keys at rest' });
    assert.equal(org.status, 201, org.raw);
    const { organizationId, apiKey } = org.body as { organizationId: string; apiKey: string };
    const second = await adminCall(server.url, 'POST', `/api/admin/organizations/${organizationId}/keys`, {
      name: 'second',
    });
    assert.equal(second.status, 201, second.raw);
    const session = await ownerSession(server.url, organizationId);
    const dashboard = await dashboardKey(session, 'from-the-dashboard');
    used.push(demoKey, apiKey, second.body.apiKey, dashboard.apiKey);
    for (const key of [apiKey, second.body.apiKey, dashboard.apiKey]) {
      assert.equal((await statusWith(server.url, key, organizationId)).status, 200);
    }
    // Revocations, and keys that are refused.
    assert.equal((await adminCall(server.url, 'DELETE', `/api/admin/keys/${second.body.id}`)).status, 204);
    assert.equal((await dashboardPost(session, `/dashboard/keys/${dashboard.id}/revoke`)).status, 200);
    tried.push(badChecksum(apiKey), generateApiKey(), `${apiKey}x`);
    for (const key of [...tried, second.body.apiKey, dashboard.apiKey]) {
      await waitFor(
        'the key to be refused',
        async () => ((await statusWith(server.url, key, organizationId)).status === 401 ? true : undefined),
        { timeoutMs: 10_000, everyMs: 200 },
      );
    }
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0, server.stderr());
    running = undefined;
    output = `${server.stdout()}\n${server.stderr()}`;
  });
  after(async () => {
    if (running) {
      running.child.kill('SIGKILL');
      await running.exited;
    }
    await cleanup?.();
  });

  test('no row of any table holds a key value, only its hash', async () => {
    const db: Db = env.DATABASE_URL
      ? await openPostgres(env.DATABASE_URL, 1, () => undefined)
      : await openPglite(dataDir ?? '');
    try {
      const rows = await allRows(db);
      for (const key of used) assert.ok(rows.includes(hashApiKey(key)), 'the hash is stored');
      assertNoKey('the database', rows, [...keyPatterns(used), ...tried]);
    } finally {
      await db.close();
    }
  });

  test('the raw data files hold no key value', async (t) => {
    const files = await databaseFiles(dataDir, env.DATABASE_URL ?? '');
    if (typeof files === 'string') {
      t.skip(files);
      return;
    }
    const total = files.reduce((n, f) => n + statSync(f).size, 0);
    assert.ok(files.length > 10 && total > 1_000_000, 'the data files were found');
    const patterns = [...used, ...tried].flatMap((key) => [
      Buffer.from(key),
      Buffer.from(key.slice(DISPLAY_PREFIX_LENGTH)),
      Buffer.from(Buffer.from(key).toString('hex')),
    ]);
    const holding = files.filter((file) => {
      const bytes = readFileSync(file);
      return patterns.some((p) => bytes.includes(p));
    });
    assert.deepEqual(holding, []);
  });

  test('no log line of the process holds a key value (the demo key is printed once, outside the logs)', () => {
    const logLines = output.split('\n').filter((line) => line.startsWith('{'));
    assert.ok(
      logLines.some((line) => line.includes('"status":401')),
      'the refusals were logged',
    );
    assertNoKey('the logs', logLines.join('\n'), [...keyPatterns(used), ...tried]);
    // Outside the log lines, only the demo organization's banner shows a key: its own.
    const rest = output
      .split('\n')
      .filter((line) => !line.startsWith('{'))
      .join('\n');
    assertNoKey('the process output', rest, [...keyPatterns(used.slice(1)), ...tried]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('a revocation reaches every api process within seconds', {
  skip: TEST_DATABASE_URL
    ? false
    : 'needs PostgreSQL: the embedded PGlite database is opened by one process only, so there is no second api process to reach',
}, () => {
  let dbUrl: string;
  let drop: () => Promise<void>;
  let a: ServerProcess | undefined;
  let b: ServerProcess | undefined;
  let organizationId: string;

  before(async () => {
    const db = await createPostgresDatabase();
    dbUrl = db.url;
    drop = db.drop;
    const env = {
      DATABASE_URL: dbUrl,
      SVC_SECRET_KEY: randomBytes(32).toString('base64'),
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_CREATE_DEMO_ORG: 'false',
      SVC_ROLE: 'api',
    };
    a = await startServerProcess(env);
    b = await startServerProcess(env);
    const org = await adminCall(a.url, 'POST', '/api/admin/organizations', { name: 'Two processes' });
    assert.equal(org.status, 201, org.raw);
    organizationId = org.body.organizationId;
  });
  after(async () => {
    for (const server of [a, b]) {
      if (!server) continue;
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0, server.stderr());
    }
    await drop?.();
  });

  /** Polls until the process refuses the key; anything but 200 (still accepted) or 401 fails. */
  async function refusedBy(server: ServerProcess, key: string, what: string) {
    const res = await waitFor(
      what,
      async () => {
        const r = await statusWith(server.url, key, organizationId);
        return r.status === 200 ? undefined : r;
      },
      { timeoutMs: 10_000, everyMs: 200 },
    );
    assert.equal(res.status, 401, res.raw);
    assert.deepEqual(JSON.parse(res.raw), UNAUTHORIZED);
  }

  test('a key revoked through the admin API of one process is refused by the other', async () => {
    const [first, second] = [a, b];
    assert.ok(first && second);
    const created = await adminCall(first.url, 'POST', `/api/admin/organizations/${organizationId}/keys`, {
      name: 'admin-revoked',
    });
    assert.equal(created.status, 201, created.raw);
    const { id, apiKey } = created.body as { id: string; apiKey: string };
    // Both processes have accepted it (and may remember it) before it is revoked.
    assert.equal((await statusWith(second.url, apiKey, organizationId)).status, 200);
    assert.equal((await statusWith(first.url, apiKey, organizationId)).status, 200);
    assert.equal((await adminCall(first.url, 'DELETE', `/api/admin/keys/${id}`)).status, 204);
    await refusedBy(second, apiKey, 'the other process to refuse the revoked key');
    await refusedBy(first, apiKey, 'the revoking process to refuse the revoked key');
  });

  test("a key revoked on one process's dashboard is refused by the other", async () => {
    assert.ok(a && b);
    const session = await ownerSession(b.url, organizationId);
    const { id, apiKey } = await dashboardKey(session, 'dashboard-revoked');
    assert.equal((await statusWith(a.url, apiKey, organizationId)).status, 200);
    assert.equal((await statusWith(b.url, apiKey, organizationId)).status, 200);
    const revoked = await dashboardPost(session, `/dashboard/keys/${id}/revoke`);
    assert.equal(revoked.status, 200);
    await refusedBy(a, apiKey, 'the other process to refuse the key revoked on the dashboard');
    await refusedBy(b, apiKey, 'the revoking process to refuse the key revoked on the dashboard');
  });
});
