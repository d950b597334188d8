// Conventions of the HTTP surface clients know from other APIs: 405 with Allow for a known path
// and another method, Location on every 201, compressed JSON answers, and the rate-limit headers
// on the public description of the API too.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import { COMPRESSION_THRESHOLD_BYTES } from '../src/http/plugins/compression.ts';
import { assertEnvelope } from './helpers/assertions.ts';
import { useTestService } from './helpers/fixtures.ts';

describe('HTTP conventions', () => {
  const fx = useTestService({ orgs: ['paid'], rateLimitPerMinute: 100_000 });

  test('a known path with another method is a 405 with Allow, after authentication; an unknown path stays 404', async () => {
    const { org } = fx;
    const taskId = randomUUID();
    const cases: [string, string, string][] = [
      ['PUT', '/api/svc/tasks', 'GET, HEAD, POST'],
      ['POST', `/api/svc/tasks/${taskId}`, 'GET, HEAD, PATCH, DELETE'],
      ['GET', `/api/svc/runs/${randomUUID()}/cancel`, 'POST'],
      ['DELETE', '/api/svc/runs', 'GET, HEAD'],
    ];
    for (const [method, url, allow] of cases) {
      const res = await fx.svc.call({ method: method as 'GET', url, key: org.apiKey });
      assertEnvelope(res, 405, 'method_not_allowed');
      assert.equal(res.headers.allow, allow, `${method} ${url}`);
      assert.ok(res.headers['x-ratelimit-limit'], 'counted like any request');
      // Without a key the answer is 401, as for an unknown path: nothing is learnt of the routes.
      const anonymous = await fx.svc.call({ method: method as 'GET', url, remoteAddress: '10.7.0.1' });
      assertEnvelope(anonymous, 401, 'unauthorized');
      assert.equal(anonymous.headers.allow, undefined);
    }
    const admin = await fx.svc.call({ method: 'PUT', url: '/api/admin/organizations', admin: true });
    assertEnvelope(admin, 405, 'method_not_allowed');
    assert.equal(admin.headers.allow, 'GET, HEAD, POST');
    assertEnvelope(
      await fx.svc.call({ method: 'PUT', url: '/api/admin/organizations' }),
      401,
      'unauthorized',
    );
    const health = await fx.svc.call({ method: 'POST', url: '/healthz' });
    assertEnvelope(health, 405, 'method_not_allowed');
    assert.equal(health.headers.allow, 'GET, HEAD');
    assertEnvelope(
      await fx.svc.call({ method: 'GET', url: '/api/svc/nothing-here', key: org.apiKey }),
      404,
      'not_found',
    );
  });

  test('every 201 carries Location, the URL of what was created', async () => {
    const { org } = fx;
    const post = async (url: string, body: Record<string, unknown>, admin = false) => {
      const res = await fx.svc.call({
        method: 'POST',
        url,
        ...(admin ? { admin } : { key: org.apiKey }),
        body,
      });
      assert.equal(res.status, 201, res.raw);
      const location = String(res.headers.location);
      assert.match(location, /^http:\/\/localhost(:80)?\//, 'an absolute URL');
      return { body: res.body, path: new URL(location).pathname };
    };
    const own = { organizationId: org.organizationId };
    const task = await post('/api/svc/tasks', {
      ...own,
      name: 'Located',
      prompt: 'Say hello',
      model: 'openai/gpt-4o-mini',
      schedule: 'daily',
      scheduleTime: '09:00',
      timezone: 'UTC',
    });
    assert.equal(task.path, `/api/svc/tasks/${task.body.id}`);
    const skill = await post('/api/svc/skills', { ...own, name: 'Located', content: 'Be brief.' });
    assert.equal(skill.path, `/api/svc/skills/${skill.body.id}`);
    const source = await post('/api/svc/sources', { ...own, name: 'Located', type: 'local', config: {} });
    assert.equal(source.path, `/api/svc/sources/${source.body.id}`);
    for (const made of [task, skill, source]) {
      const got = await fx.svc.call({ method: 'GET', url: made.path, key: org.apiKey });
      assert.equal(got.status, 200);
      assert.equal(got.body.id, made.body.id, 'Location names the created resource');
    }
    const destination = await post(`/api/svc/tasks/${task.body.id}/destinations`, {
      type: 'webhook',
      value: 'https://hooks.example.com/in',
    });
    assert.equal(destination.path, `/api/svc/tasks/${task.body.id}/destinations/${destination.body.id}`);

    const organization = await post('/api/admin/organizations', { name: 'Located org', plan: 'free' }, true);
    assert.equal(organization.path, `/api/admin/organizations/${organization.body.organizationId}`);
    const key = await post(`/api/admin/organizations/${org.organizationId}/keys`, { name: 'located' }, true);
    assert.equal(key.path, `/api/admin/keys/${key.body.id}`);
    const user = await post(
      `/api/admin/organizations/${org.organizationId}/users`,
      { email: `located-${randomUUID()}@example.com`, password: 'a long enough password 1', role: 'member' },
      true,
    );
    assert.equal(user.path, `/api/admin/organizations/${org.organizationId}/users`);
  });

  test('JSON answers from 1 KiB are compressed as Accept-Encoding prefers; smaller ones are not; Vary says so', async () => {
    const inject = (url: string, acceptEncoding?: string) =>
      fx.svc.app.inject({
        method: 'GET',
        url,
        headers: {
          authorization: `Bearer ${fx.org.apiKey}`,
          ...(acceptEncoding !== undefined && { 'accept-encoding': acceptEncoding }),
        },
      });
    const big = '/api/svc/openapi.json';
    const plain = await inject(big);
    assert.equal(plain.headers['content-encoding'], undefined, 'nothing asked, nothing compressed');
    assert.ok(plain.rawPayload.length > COMPRESSION_THRESHOLD_BYTES);
    const expected = JSON.parse(plain.body);
    const decoders = { gzip: gunzipSync, br: brotliDecompressSync } as const;
    const choices: [string, keyof typeof decoders][] = [
      ['gzip', 'gzip'],
      ['br', 'br'],
      ['gzip, deflate, br', 'br'],
      ['br;q=0.5, gzip', 'gzip'],
      ['*', 'br'],
      ['br;q=0, *;q=0.1', 'gzip'],
    ];
    for (const [accept, coding] of choices) {
      const res = await inject(big, accept);
      assert.equal(res.headers['content-encoding'], coding, accept);
      assert.match(String(res.headers.vary), /accept-encoding/i);
      assert.ok(res.rawPayload.length < plain.rawPayload.length / 2, 'smaller');
      assert.equal(Number(res.headers['content-length']), res.rawPayload.length);
      assert.deepEqual(JSON.parse(decoders[coding](res.rawPayload).toString('utf8')), expected, accept);
    }
    for (const refused of ['identity', 'gzip;q=0, br;q=0', 'deflate', '*;q=0']) {
      const res = await inject(big, refused);
      assert.equal(res.headers['content-encoding'], undefined, refused);
    }
    // A small answer stays as it is, whatever is accepted.
    const small = await inject(`/api/svc/billing/status?organizationId=${fx.org.organizationId}`, 'gzip, br');
    assert.equal(small.statusCode, 200);
    assert.ok(small.rawPayload.length < COMPRESSION_THRESHOLD_BYTES);
    assert.equal(small.headers['content-encoding'], undefined);
    assert.match(String(small.headers.vary), /accept-encoding/i);
    assert.ok(JSON.parse(small.body).plan);
  });

  test('a compressed request body is never decompressed: it is a 400, not JSON', async () => {
    const body = gzipSync(JSON.stringify({ organizationId: fx.org.organizationId, name: 'x', content: 'y' }));
    const res = await fx.svc.app.inject({
      method: 'POST',
      url: '/api/svc/skills',
      headers: {
        authorization: `Bearer ${fx.org.apiKey}`,
        'content-type': 'application/json',
        'content-encoding': 'gzip',
      },
      payload: body,
    });
    assert.equal(res.statusCode, 400, res.body);
    assert.equal(JSON.parse(res.body).error.code, 'validation_error');
  });

  test('the API description, its page and assets carry the rate-limit headers, counted per client address', async () => {
    const address = '10.7.1.1';
    // The limit is counted per clock minute: a test that crossed into the next minute would
    // start counting again and never reach it, so one started in a minute's last seconds waits.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 50_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 50));
    const get = (url: string, headers: Record<string, string> = {}) =>
      fx.svc.call({ method: 'GET', url, remoteAddress: address, headers });
    const page = await get('/api/svc/docs');
    assert.equal(page.status, 200);
    const asset = /href="(\/api\/svc\/docs\/static\/[^"]+\.css)"/.exec(page.raw)?.[1];
    assert.ok(asset, 'the page links its stylesheet');
    // The page, its redirect, an asset, a missing asset, the document.
    const urls: [string, number][] = [
      ['/api/svc/openapi.json', 200],
      ['/api/svc/docs/static/index.html', 302],
      [asset, 200],
      ['/api/svc/docs/static/no-such-file.js', 404],
      ['/api/svc/docs/', 200],
    ];
    let remaining = Number.POSITIVE_INFINITY;
    for (const [url, status] of urls) {
      const res = await get(url);
      assert.equal(res.status, status, url);
      assert.equal(res.headers['x-ratelimit-limit'], '60', url);
      assert.ok(res.headers['x-ratelimit-reset'], url);
      const left = Number(res.headers['x-ratelimit-remaining']);
      assert.ok(left < remaining, `${url} is counted`);
      remaining = left;
    }
    // The same bucket as a refused key from that address.
    const refused = await fx.svc.call({ method: 'GET', url: '/api/svc/tasks', remoteAddress: address });
    assert.equal(Number(refused.headers['x-ratelimit-remaining']), remaining - 1);
    // Past the limit, the description is refused too, in the envelope, with Retry-After.
    let last = refused;
    for (let i = 0; i < 60 && last.status !== 429; i++) last = await get('/api/svc/openapi.json');
    assertEnvelope(last, 429, 'rate_limited');
    assert.ok(last.headers['retry-after']);
    assert.equal(last.headers['x-ratelimit-remaining'], '0');
    // Another address is unaffected.
    const elsewhere = await fx.svc.call({
      method: 'GET',
      url: '/api/svc/openapi.json',
      remoteAddress: '10.7.1.2',
    });
    assert.equal(elsewhere.status, 200);
  });
});
