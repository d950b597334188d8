import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { generateApiKey, KEY_PREFIX } from '../src/domain/api-key-format.ts';
import { type Reply, startTestService, type TestService } from './helpers/service.ts';

const statusUrl = (orgId: string) => `/api/svc/billing/status?organizationId=${orgId}`;

function assertUnauthorized(res: Reply) {
  assert.equal(res.status, 401, res.raw);
  assert.deepEqual(res.body, { error: { code: 'unauthorized', message: 'Invalid or missing API key' } });
  for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
    assert.match(String(res.headers[h]), /^\d+$/, `${h} on a 401`);
  }
}

describe('authentication', () => {
  let svc: TestService;
  let org: { organizationId: string; apiKey: string };
  let other: { organizationId: string; apiKey: string };

  before(async () => {
    svc = await startTestService();
    org = await svc.createOrg();
    other = await svc.createOrg();
  });
  after(() => svc.close());

  test('a valid key reaches its organization and gets 200 with rate-limit headers', async () => {
    const res = await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: org.apiKey });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.plan, 'free');
    assert.equal(res.headers['x-ratelimit-limit'], '60');
  });

  test('successive requests of a key count down its rate limit one by one', async () => {
    // After the first, most are decided from what the process holds (no promise), the
    // others by a claim on the shared counter: the count is the same either way.
    const fresh = await svc.createOrg();
    const seen: { reset: string; remaining: number }[] = [];
    for (let i = 0; i < 15; i++) {
      const res = await svc.call({ method: 'GET', url: statusUrl(fresh.organizationId), key: fresh.apiKey });
      assert.equal(res.status, 200, res.raw);
      seen.push({
        reset: String(res.headers['x-ratelimit-reset']),
        remaining: Number(res.headers['x-ratelimit-remaining']),
      });
    }
    // Counted per one-minute window: should the requests straddle a minute, the count restarts.
    seen.forEach(({ reset, remaining }, i) => {
      const before = seen[i - 1];
      assert.equal(
        remaining,
        before && before.reset === reset ? before.remaining - 1 : 59,
        `request ${i + 1}`,
      );
    });
  });

  const causes: [string, (key: string) => Record<string, string>][] = [
    ['a missing Authorization header', () => ({})],
    [
      'another scheme (Basic)',
      (key) => ({ authorization: `Basic ${Buffer.from(`x:${key}`).toString('base64')}` }),
    ],
    ['a bare key without the Bearer scheme', (key) => ({ authorization: key })],
    ['an empty bearer token', () => ({ authorization: 'Bearer ' })],
    ['a malformed key', () => ({ authorization: 'Bearer not-a-key' })],
    [
      'a key of the right shape with a bad checksum',
      (key) => ({ authorization: `Bearer ${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}` }),
    ],
    ['a well-formed key that was never issued', () => ({ authorization: `Bearer ${generateApiKey()}` })],
  ];
  for (const [name, headers] of causes) {
    test(`${name} is refused with the 401 envelope`, async () => {
      const res = await svc.call({
        method: 'GET',
        url: statusUrl(org.organizationId),
        headers: headers(org.apiKey),
      });
      assertUnauthorized(res);
    });
  }

  test('the key of another organization is refused for this organization with 401', async () => {
    const res = await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: other.apiKey });
    assertUnauthorized(res);
  });

  test('the organizationId matches its key whatever the letter case of the uuid', async () => {
    const res = await svc.call({
      method: 'GET',
      url: statusUrl(org.organizationId.toUpperCase()),
      key: org.apiKey,
    });
    assert.equal(res.status, 200, res.raw);
  });

  test('an organizationId that is not a uuid is a 400 naming the field', async () => {
    const res = await svc.call({ method: 'GET', url: statusUrl('nope'), key: org.apiKey });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'validation_error');
    assert.equal(res.body.error.details[0].path, '/query/organizationId');
  });

  test('a revoked key is refused from the next request on', async () => {
    const created = await svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${org.organizationId}/keys`,
      admin: true,
      body: { name: 'to revoke' },
    });
    assert.equal(created.status, 201, created.raw);
    assert.ok(created.body.apiKey.startsWith(KEY_PREFIX));
    const ok = await svc.call({
      method: 'GET',
      url: statusUrl(org.organizationId),
      key: created.body.apiKey,
    });
    assert.equal(ok.status, 200);
    const revoked = await svc.call({
      method: 'DELETE',
      url: `/api/admin/keys/${created.body.id}`,
      admin: true,
    });
    assert.equal(revoked.status, 204);
    assertUnauthorized(
      await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: created.body.apiKey }),
    );
  });

  test('an expired key is refused', async () => {
    const soon = new Date(Date.now() + 1500).toISOString();
    const created = await svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${org.organizationId}/keys`,
      admin: true,
      body: { name: 'short-lived', expiresAt: soon },
    });
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.expiresAt, new Date(soon).toISOString());
    assert.equal(
      (await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: created.body.apiKey }))
        .status,
      200,
    );
    // Expiry is compared with the service clock; wait it out rather than fake the database.
    await new Promise((r) => setTimeout(r, 1600));
    assertUnauthorized(
      await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: created.body.apiKey }),
    );
  });

  test('using a key records lastUsedAt, and key listings never contain key values', async () => {
    await svc.call({ method: 'GET', url: statusUrl(other.organizationId), key: other.apiKey });
    const list = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${other.organizationId}/keys`,
      admin: true,
    });
    assert.equal(list.status, 200);
    assert.equal(list.body.length, 1);
    assert.ok(list.body[0].lastUsedAt, 'lastUsedAt set');
    assert.ok(other.apiKey.startsWith(list.body[0].prefix));
    assert.ok(!list.raw.includes(other.apiKey), 'no key value in the listing');
  });

  test('no key value is ever written to the logs', () => {
    const all = svc.logs.join('');
    assert.ok(all.length > 0);
    assert.ok(!all.includes(org.apiKey) && !all.includes(other.apiKey));
  });
});
