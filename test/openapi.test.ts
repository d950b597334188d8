import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startTestService, type TestService } from './helpers/service.ts';

describe('OpenAPI document', () => {
  let svc: TestService;
  let doc: any;
  before(async () => {
    svc = await startTestService();
    const res = await svc.call({ method: 'GET', url: '/api/svc/openapi.json' });
    assert.equal(res.status, 200);
    doc = res.body;
  });
  after(() => svc.close());

  test('is served without a key and validates as OpenAPI 3.1', async () => {
    assert.equal(doc.openapi, '3.1.0');
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
    assert.equal(validator.version, '3.1');
  });

  test('lists every API route the server serves, with its method, and no dashboard page', () => {
    // The dashboard's pages (everything outside /api/, /healthz, /readyz, /metrics) are HTML for
    // people, not API operations.
    const isApi = (url: string) =>
      url.startsWith('/api/') || ['/healthz', '/readyz', '/metrics'].includes(url);
    const served = svc.app.registeredRoutes.filter(
      (r) => r.method !== 'HEAD' && !r.url.startsWith('/api/svc/docs') && isApi(r.url),
    );
    for (const url of Object.keys(doc.paths)) assert.ok(isApi(url), `${url} in the document is an API route`);
    assert.ok(served.length >= 10);
    const toOpenApi = (url: string) => url.replace(/:([A-Za-z]+)/g, '{$1}').replace(/\/$/, '') || '/';
    for (const r of served) {
      const path = doc.paths[toOpenApi(r.url)];
      assert.ok(path, `${r.url} is in the document`);
      assert.ok(path[r.method.toLowerCase()], `${r.method} ${r.url} is in the document`);
    }
  });

  test('every error response of every operation uses the one envelope', () => {
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        for (const [status, response] of Object.entries<any>(op.responses ?? {})) {
          if (Number(status) < 400) continue;
          const schema = response.content?.['application/json']?.schema;
          assert.equal(schema?.$ref, '#/components/schemas/ErrorEnvelope', `${method} ${path} ${status}`);
        }
      }
    }
  });

  test('the reference page is served', async () => {
    const res = await svc.call({ method: 'GET', url: '/api/svc/docs/' });
    assert.equal(res.status, 200);
    assert.match(res.raw, /swagger/i);
  });
});
