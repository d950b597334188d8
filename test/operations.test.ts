import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestService, type TestService } from './helpers/service.ts';

describe('health, readiness and metrics', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService();
  });
  after(() => svc.close().catch(() => undefined));

  test('/healthz says the process is up, without a key', async () => {
    const res = await svc.call({ method: 'GET', url: '/healthz' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok' });
  });

  test('/readyz says the database answers', async () => {
    const res = await svc.call({ method: 'GET', url: '/readyz' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ready' });
  });

  test('/metrics counts requests by route template and status, with a latency histogram', async () => {
    const org = await svc.createOrg();
    await svc.call({
      method: 'GET',
      url: `/api/svc/billing/status?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    await svc.call({ method: 'GET', url: `/api/svc/billing/status?organizationId=${org.organizationId}` });
    const res = await svc.call({ method: 'GET', url: '/metrics' });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain/);
    assert.match(
      res.raw,
      /svc_http_requests_total\{method="GET",route="\/api\/svc\/billing\/status",status="200"\} 1/,
    );
    assert.match(
      res.raw,
      /svc_http_requests_total\{method="GET",route="\/api\/svc\/billing\/status",status="401"\} 1/,
    );
    assert.match(
      res.raw,
      /svc_http_request_duration_seconds_bucket\{le="0\.1",method="GET",route="\/api\/svc\/billing\/status"\}/,
    );
    assert.ok(!res.raw.includes(org.organizationId), 'no raw URLs as labels');
  });

  test('/readyz answers 503 in the envelope when the database is gone', async () => {
    await svc.testDb.db.close();
    const res = await svc.call({ method: 'GET', url: '/readyz' });
    assert.equal(res.status, 503);
    assert.equal(res.body.error.code, 'service_unavailable');
    const health = await svc.call({ method: 'GET', url: '/healthz' });
    assert.equal(health.status, 200, 'the process itself is still up');
  });
});
