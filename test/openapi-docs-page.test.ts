// The API reference page at /api/svc/docs, opened in Chromium over plain http under a host name
// other than localhost (svc.test, mapped to the loopback address by Chromium's resolver rules):
// it renders the operations, and its Content-Security-Policy refuses nothing. Its policy asks
// for an upgrade to https only when the request came over https.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { launchBrowser } from './helpers/browser.ts';
import { startTestService, type TestService } from './helpers/service.ts';

describe('the API reference page', () => {
  let svc: TestService;
  let browser: Browser;

  before(async () => {
    svc = await startTestService({ listen: true, env: { HOST: '127.0.0.1' } });
    browser = await launchBrowser(['--host-resolver-rules=MAP svc.test 127.0.0.1']);
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
  });

  test('renders every operation over plain http at a non-loopback host name, with no CSP violation', async () => {
    const port = new URL(svc.service.url ?? '').port;
    const page = await browser.newPage();
    const violations: string[] = [];
    const failed: string[] = [];
    page.on('console', (msg) => {
      if (/content security policy|refused to/i.test(msg.text())) violations.push(msg.text());
    });
    page.on('requestfailed', (req) => failed.push(`${req.url()}: ${req.failure()?.errorText}`));
    try {
      const res = await page.goto(`http://svc.test:${port}/api/svc/docs/`);
      assert.equal(res?.status(), 200);
      assert.doesNotMatch(res?.headers()['content-security-policy'] ?? '', /upgrade-insecure-requests/);
      // Swagger UI draws one block per operation once its scripts have loaded the document.
      await page.locator('.opblock').first().waitFor();
      const doc = (await (await fetch(`${svc.service.url}/api/svc/openapi.json`)).json()) as {
        paths: Record<string, Record<string, unknown>>;
      };
      const operations = Object.values(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0);
      assert.equal(await page.locator('.opblock').count(), operations);
      await page.getByText('Create a task', { exact: true }).waitFor();
      assert.deepEqual(violations, []);
      assert.deepEqual(failed, []);
    } finally {
      await page.close();
    }
  });

  test('asks for an upgrade to https only when the request came over https through a trusted proxy', async () => {
    const over = (headers: Record<string, string> = {}) =>
      svc.call({ method: 'GET', url: '/api/svc/docs/', headers });
    // No proxy is trusted by default: a client's own X-Forwarded-Proto is not believed.
    for (const res of [await over(), await over({ 'x-forwarded-proto': 'https' })]) {
      assert.equal(res.status, 200);
      assert.doesNotMatch(String(res.headers['content-security-policy']), /upgrade-insecure-requests/);
      assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/);
    }
    const proxied = await startTestService({ env: { SVC_TRUST_PROXY_HOPS: '1' } });
    try {
      const https = await proxied.call({
        method: 'GET',
        url: '/api/svc/docs/',
        headers: { 'x-forwarded-proto': 'https' },
      });
      assert.match(String(https.headers['content-security-policy']), /; upgrade-insecure-requests$/);
      const http = await proxied.call({
        method: 'GET',
        url: '/api/svc/docs/',
        headers: { 'x-forwarded-proto': 'http' },
      });
      assert.doesNotMatch(String(http.headers['content-security-policy']), /upgrade-insecure-requests/);
    } finally {
      await proxied.close();
    }
  });
});
