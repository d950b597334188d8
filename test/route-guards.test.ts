// Every route is guarded by the scope it is registered in. Derived from the routes the app
// registers, so that a route added later outside its scope (an API route without the key check,
// a dashboard page without the session check) fails here: every route under /api/svc/ answers
// 401 without a key, every route under /api/admin/ 401 without the operator token, and every
// dashboard page except the public ones sends a signed-out visitor to the sign-in page.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { assertEnvelope } from './helpers/assertions.ts';
import { startTestService, type TestService } from './helpers/service.ts';

/**
 * Routes under /api/svc/ that take no API key: the API's description, Stripe's events and the
 * return from a connector sign-in (its sealed state is its authorization).
 */
const PUBLIC_API = [
  /^\/api\/svc\/openapi\.json$/,
  /^\/api\/svc\/docs(\/|$)/,
  /^\/api\/svc\/billing\/webhook$/,
  /^\/api\/svc\/connectors\/callback$/,
];
/** Operations: public by design. */
const OPERATIONS = ['/healthz', '/readyz', '/metrics'];
/** Dashboard routes for signed-out visitors. */
const PUBLIC_PAGES = [
  'GET /',
  'GET /login',
  'POST /login',
  'GET /signup',
  'POST /signup',
  'POST /logout',
  // The OAuth callback of sources: the provider's redirect carries no session; its state says whose it is.
  'GET /oauth/callback',
];
const PUBLIC_PAGE_PATTERNS = ['GET /invite/:token', 'POST /invite/:token'];
/** Fragments fetched by a page's script: signed out, a bare 401 rather than a redirect. */
const FRAGMENTS = ['GET /dashboard/schedule-preview'];
/** A double-submit form token (cookie and field), so that a signed-out form passes its CSRF check. */
const FORM_TOKEN = 'g'.repeat(43);

const fill = (url: string) => url.replace(/:(\w+)/g, () => randomUUID());

describe('every route is guarded by its scope', () => {
  let svc: TestService;
  let routes: { method: string; url: string }[];
  /** A fresh client address per call: refused calls are counted per address. */
  let client = 0;
  const address = () => `10.9.${Math.floor(++client / 250)}.${client % 250}`;

  before(async () => {
    svc = await startTestService({ env: { SVC_ROLE: 'api' } });
    routes = svc.app.registeredRoutes;
  });
  after(async () => {
    await svc?.close();
  });

  const isApi = (url: string) => url.startsWith('/api/');
  const isOperations = (url: string) => OPERATIONS.includes(url);
  const key = (r: { method: string; url: string }) => `${r.method} ${r.url}`;

  test('every route under /api/svc/ except the public ones answers 401 without a key, and with a wrong key', async () => {
    const guarded = routes.filter(
      (r) => r.url.startsWith('/api/svc/') && !PUBLIC_API.some((p) => p.test(r.url)),
    );
    assert.ok(guarded.length >= 40, `API routes found: ${guarded.map(key).join(', ')}`);
    for (const r of guarded) {
      for (const apiKey of [undefined, `sats_${'x'.repeat(40)}`]) {
        const res = await svc.call({
          method: r.method as 'GET',
          url: fill(r.url),
          ...(apiKey && { key: apiKey }),
          ...(r.method !== 'GET' && r.method !== 'HEAD' && r.method !== 'DELETE' && { body: {} }),
          remoteAddress: address(),
        });
        const where = `${key(r)} ${apiKey ? 'with a wrong key' : 'without a key'}`;
        if (r.method === 'HEAD') assert.equal(res.status, 401, where);
        else assertEnvelope(res, 401, 'unauthorized');
        assert.ok(res.headers['x-ratelimit-limit'], `${where}: rate-limit headers`);
      }
    }
  });

  test('every route under /api/admin/ answers 401 without the operator token', async () => {
    const guarded = routes.filter((r) => r.url.startsWith('/api/admin/'));
    assert.ok(guarded.length >= 9, `admin routes found: ${guarded.map(key).join(', ')}`);
    for (const r of guarded) {
      const res = await svc.call({
        method: r.method as 'GET',
        url: fill(r.url),
        headers: { authorization: 'Bearer not-the-token' },
        ...(r.method === 'POST' || r.method === 'PATCH' ? { body: {} } : {}),
      });
      if (r.method === 'HEAD') assert.equal(res.status, 401, key(r));
      else assertEnvelope(res, 401, 'unauthorized');
    }
  });

  test('unknown paths under /api/svc/ and /api/admin/ answer 401 before 404', async () => {
    for (const url of ['/api/svc/no-such-route', '/api/svc/tasks/x/no-such', '/api/admin/no-such-route']) {
      const res = await svc.call({ method: 'GET', url, remoteAddress: address() });
      assertEnvelope(res, 401, 'unauthorized');
    }
  });

  test('every dashboard page except the public ones redirects a signed-out visitor to sign in', async () => {
    const pages = routes.filter(
      (r) =>
        !isApi(r.url) &&
        !isOperations(r.url) &&
        (r.method === 'GET' || r.method === 'POST') &&
        ![...PUBLIC_PAGES, ...PUBLIC_PAGE_PATTERNS, ...FRAGMENTS].includes(key(r)),
    );
    assert.ok(pages.length >= 30, `dashboard pages found: ${pages.map(key).join(', ')}`);
    for (const r of pages) {
      const url = fill(r.url);
      const res = await svc.app.inject({
        method: r.method as 'GET',
        url,
        ...(r.method === 'POST' && {
          headers: {
            cookie: `svc_form=${FORM_TOKEN}`,
            'content-type': 'application/x-www-form-urlencoded',
          },
          payload: new URLSearchParams({ _csrf: FORM_TOKEN, name: 'x' }).toString(),
        }),
        remoteAddress: address(),
      });
      assert.equal(res.statusCode, 303, `${key(r)}: ${res.statusCode} ${res.body.slice(0, 200)}`);
      assert.equal(res.headers.location, `/login?next=${encodeURIComponent(url)}`, key(r));
    }
  });

  test("a page's script fragments answer a signed-out visitor with a bare 401", async () => {
    for (const fragment of FRAGMENTS) {
      const [method = '', url = ''] = fragment.split(' ');
      const res = await svc.app.inject({ method: method as 'GET', url, remoteAddress: address() });
      assert.equal(res.statusCode, 401, fragment);
      assert.equal(res.body, '', fragment);
    }
  });

  test('the public routes and fragments listed here are all registered (the lists are not stale)', () => {
    const registered = new Set(routes.map(key));
    for (const listed of [...PUBLIC_PAGES, ...PUBLIC_PAGE_PATTERNS, ...FRAGMENTS]) {
      assert.ok(registered.has(listed), `${listed} is registered`);
    }
    for (const pattern of PUBLIC_API) {
      assert.ok(
        routes.some((r) => pattern.test(r.url)),
        `a route matches ${pattern}`,
      );
    }
  });
});
