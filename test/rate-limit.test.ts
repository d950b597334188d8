import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../src/lib/clock.ts';
import { startTestService, type TestService } from './helpers/service.ts';

const statusUrl = (orgId: string) => `/api/svc/billing/status?organizationId=${orgId}`;

describe('rate limits', () => {
  // 10 s into a minute: the whole test stays inside one window unless it moves the clock.
  const clock = new ManualClock('2030-01-01T10:00:10Z');
  const windowEnd = Date.parse('2030-01-01T10:01:00Z') / 1000;
  let svc: TestService;

  before(async () => {
    svc = await startTestService({ clock });
  });
  after(() => svc.close());

  test('a free organization gets 60 requests a minute, then 429 with Retry-After; headers count down', async () => {
    const org = await svc.createOrg('free');
    for (let i = 1; i <= 60; i++) {
      const res = await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: org.apiKey });
      assert.equal(res.status, 200, `request ${i}`);
      assert.equal(res.headers['x-ratelimit-limit'], '60');
      assert.equal(res.headers['x-ratelimit-remaining'], String(60 - i));
      assert.equal(res.headers['x-ratelimit-reset'], String(windowEnd));
    }
    const limited = await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: org.apiKey });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.error.code, 'rate_limited');
    assert.equal(limited.headers['retry-after'], '50');
    assert.equal(limited.headers['x-ratelimit-remaining'], '0');

    // Another organization is unaffected.
    const other = await svc.createOrg('free');
    const fine = await svc.call({ method: 'GET', url: statusUrl(other.organizationId), key: other.apiKey });
    assert.equal(fine.status, 200);
    assert.equal(fine.headers['x-ratelimit-remaining'], '59');

    // The next window starts afresh.
    clock.set('2030-01-01T10:01:00Z');
    const next = await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: org.apiKey });
    assert.equal(next.status, 200);
    assert.equal(next.headers['x-ratelimit-remaining'], '59');
    assert.equal(next.headers['x-ratelimit-reset'], String(windowEnd + 60));
    clock.set('2030-01-01T10:00:10Z');
  });

  test('all keys of one organization share its budget', async () => {
    clock.set('2030-01-01T11:00:05Z');
    const org = await svc.createOrg('free');
    const second = await svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${org.organizationId}/keys`,
      admin: true,
      body: { name: 'second' },
    });
    for (let i = 0; i < 30; i++) {
      await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: org.apiKey });
      await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: second.body.apiKey });
    }
    const res = await svc.call({
      method: 'GET',
      url: statusUrl(org.organizationId),
      key: second.body.apiKey,
    });
    assert.equal(res.status, 429);
  });

  test('the paid plan allows 300 a minute and an operator override replaces the plan figure', async () => {
    clock.set('2030-01-01T12:00:05Z');
    const org = await svc.createOrg('paid');
    const res = await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: org.apiKey });
    assert.equal(res.headers['x-ratelimit-limit'], '300');

    const patched = await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${org.organizationId}`,
      admin: true,
      body: { rateLimitPerMinute: 2 },
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.equal(patched.body.limits.rateLimitPerMinute, 2);
    const second = await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: org.apiKey });
    assert.equal(second.status, 200);
    assert.equal(second.headers['x-ratelimit-limit'], '2');
    assert.equal(second.headers['x-ratelimit-remaining'], '0');
    const third = await svc.call({ method: 'GET', url: statusUrl(org.organizationId), key: org.apiKey });
    assert.equal(third.status, 429);

    const reset = await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${org.organizationId}`,
      admin: true,
      body: { rateLimitPerMinute: null },
    });
    assert.equal(reset.body.limits.rateLimitPerMinute, 300);
  });

  test('failed authentications are counted per client address and limited too', async () => {
    clock.set('2030-01-01T13:00:05Z');
    const org = await svc.createOrg('free');
    for (let i = 1; i <= 60; i++) {
      const res = await svc.call({
        method: 'GET',
        url: statusUrl(org.organizationId),
        remoteAddress: '203.0.113.7',
      });
      assert.equal(res.status, 401);
      assert.equal(res.headers['x-ratelimit-remaining'], String(60 - i));
    }
    const limited = await svc.call({
      method: 'GET',
      url: statusUrl(org.organizationId),
      remoteAddress: '203.0.113.7',
    });
    assert.equal(limited.status, 429);
    assert.match(String(limited.headers['retry-after']), /^\d+$/);
    // Another address, and the organization's own key, are unaffected.
    const elsewhere = await svc.call({
      method: 'GET',
      url: statusUrl(org.organizationId),
      remoteAddress: '203.0.113.8',
    });
    assert.equal(elsewhere.status, 401);
    const keyed = await svc.call({
      method: 'GET',
      url: statusUrl(org.organizationId),
      key: org.apiKey,
      remoteAddress: '203.0.113.7',
    });
    assert.equal(keyed.status, 200);
  });
});
