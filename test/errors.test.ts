import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertEnvelope } from './helpers/assertions.ts';
import { useTestService } from './helpers/fixtures.ts';

describe('error envelope', () => {
  const fx = useTestService({ orgs: ['free'] });

  test('validation failures answer 400 with details naming each field', async () => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/admin/organizations',
      admin: true,
      body: { plan: 'gold', extra: 1 },
    });
    assertEnvelope(res, 400, 'validation_error');
    const paths = res.body.error.details.map((d: { path: string }) => d.path).sort();
    assert.deepEqual(paths, ['/body/extra', '/body/name', '/body/plan']);
    const plan = res.body.error.details.find((d: { path: string }) => d.path === '/body/plan');
    assert.match(plan.message, /free, paid/);
  });

  test('a body value of the wrong type is refused, not coerced', async () => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/admin/organizations',
      admin: true,
      body: { name: 42 },
    });
    assertEnvelope(res, 400, 'validation_error');
    assert.equal(res.body.error.details[0].path, '/body/name');
  });

  test('an unknown route answers 404 in the envelope', async () => {
    assertEnvelope(await fx.svc.call({ method: 'GET', url: '/no/such/thing' }), 404, 'not_found');
    assertEnvelope(
      await fx.svc.call({ method: 'GET', url: '/api/svc/nothing-here', key: fx.org.apiKey }),
      404,
      'not_found',
    );
  });

  test('an unknown route under /api/svc/ asks for authentication first', async () => {
    assertEnvelope(await fx.svc.call({ method: 'GET', url: '/api/svc/nothing-here' }), 401, 'unauthorized');
  });

  test('malformed JSON answers 400', async () => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/admin/organizations',
      admin: true,
      body: '{"name": "x",',
      headers: { 'content-type': 'application/json' },
    });
    assertEnvelope(res, 400, 'validation_error');
    assert.match(res.body.error.message, /not valid JSON/);
  });

  test('an empty JSON body answers 400', async () => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/admin/organizations',
      admin: true,
      body: '',
      headers: { 'content-type': 'application/json' },
    });
    assertEnvelope(res, 400, 'validation_error');
  });

  test('a prototype-poisoning body answers 400', async () => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/admin/organizations',
      admin: true,
      body: '{"name":"x","__proto__":{"admin":true}}',
      headers: { 'content-type': 'application/json' },
    });
    assertEnvelope(res, 400, 'validation_error');
  });

  test('a body that is not JSON answers 415', async () => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/admin/organizations',
      admin: true,
      body: 'name=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assertEnvelope(res, 415, 'unsupported_media_type');
  });

  test('a text/plain body answers 415, not a parse error', async () => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/admin/organizations',
      admin: true,
      body: '{"name":"x"}',
      headers: { 'content-type': 'text/plain' },
    });
    assertEnvelope(res, 415, 'unsupported_media_type');
  });

  test('a body over 1 MiB answers 413', async () => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/admin/organizations',
      admin: true,
      body: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) }),
      headers: { 'content-type': 'application/json' },
    });
    assertEnvelope(res, 413, 'payload_too_large');
  });

  test('an internal failure answers 500 without a stack trace, and the cause is logged', async () => {
    await fx.db.exec('ALTER TABLE organizations RENAME TO organizations_moved');
    try {
      const res = await fx.svc.call({
        method: 'GET',
        url: `/api/svc/billing/status?organizationId=${fx.org.organizationId}`,
        key: fx.org.apiKey,
      });
      assertEnvelope(res, 500, 'internal_error');
      assert.equal(res.body.error.message, 'Internal server error');
      assert.ok(!res.raw.includes('organizations'), 'no SQL detail leaks');
    } finally {
      await fx.db.exec('ALTER TABLE organizations_moved RENAME TO organizations');
    }
    assert.ok(fx.svc.logs.some((l) => l.includes('"level":50') && l.includes('organizations')));
  });

  test('every response carries a request id, and a safe caller id is kept', async () => {
    const mine = await fx.svc.call({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'trace-123' },
    });
    assert.equal(mine.headers['x-request-id'], 'trace-123');
    const unsafe = await fx.svc.call({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'bad id\n' },
    });
    assert.match(String(unsafe.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  });

  test('each request writes one access line: its id, method, route, path without query, status, time and organization, never its key', async () => {
    const res = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/tasks?organizationId=${fx.org.organizationId}&limit=5`,
      key: fx.org.apiKey,
      headers: { 'x-request-id': 'access-line-1' },
    });
    assert.equal(res.status, 200);
    const lines = fx.svc.logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.reqId === 'access-line-1' && l.msg === 'request');
    assert.equal(lines.length, 1);
    const line = lines[0] ?? {};
    assert.equal(line.level, 30);
    assert.equal(line.method, 'GET');
    assert.equal(line.route, '/api/svc/tasks');
    assert.equal(line.url, '/api/svc/tasks');
    assert.equal(line.status, 200);
    assert.equal(line.org, fx.org.organizationId);
    assert.equal(typeof line.ms, 'number');
    assert.ok(!fx.svc.logs.some((l) => l.includes(fx.org.apiKey)), 'the API key is in no log line');
  });
});
