// The dashboard in a real browser (Debian's Chromium through playwright-core), against the
// service listening on a port, with its worker and a local model server.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser } from './helpers/browser.ts';
import { type ModelServer, startModelServer } from './helpers/model-server.ts';
import { startTestService, type TestService } from './helpers/service.ts';

let browser: Browser;
let svc: TestService;
let model: ModelServer;
let base: string;

// The service and the browser are started and closed around this file's tests: a top-level
// before/after would run around the whole batch of files that shares the test process.
describe('the dashboard end to end in Chromium', () => {
  before(async () => {
    model = await startModelServer((req) => ({
      content: `## Morning summary\n\nAll **good** for: ${req.body.messages.filter((m) => m.role === 'user').at(-1)?.content}`,
    }));
    svc = await startTestService({
      listen: true,
      startLoops: true,
      env: { SVC_MODEL_BASE_URL: model.url, SVC_MODEL_API_KEY: 'sk-test', HOST: '127.0.0.1' },
    });
    assert.ok(svc.service.url, 'the service listens');
    base = svc.service.url;
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
    await model?.close();
  });

  async function api(path: string, key: string, init: RequestInit = {}) {
    const res = await fetch(`${base}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers },
    });
    return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
  }

  test('a person signs up, makes an API key, runs a daily task from the browser, and a revoked key stops working', async () => {
    const page: Page = await browser.newPage();
    // The whole journey runs under the pages' Content-Security-Policy: nothing it refuses.
    const violations: string[] = [];
    page.on('console', (msg) => {
      if (/content security policy/i.test(msg.text())) violations.push(`${page.url()}: ${msg.text()}`);
    });
    try {
      // Sign up: an organization on the free plan, its owner signed in.
      await page.goto(`${base}/signup`);
      await page.getByLabel('Organization name').fill('Acme Research');
      await page.getByLabel('Your name').fill('Ada');
      await page.getByLabel('E-mail').fill('ada@example.com');
      await page.getByLabel(/^Password/).fill('correct horse battery');
      await page.getByRole('button', { name: 'Create organization' }).click();
      await page.waitForURL(/\/dashboard\/keys/);

      // An API key: the value is shown once, and works with the REST API.
      await page.getByLabel('Name').fill('e2e script');
      await page.getByRole('button', { name: 'Create key' }).click();
      const key = (await page.locator('#key-value').textContent())?.trim() ?? '';
      assert.match(key, /\S{20,}/);
      const organizationId = (await page.locator('#organization-id').textContent())?.trim() ?? '';
      const tasks = await api(`/api/svc/tasks?organizationId=${organizationId}`, key);
      assert.equal(tasks.status, 200);
      assert.deepEqual(tasks.body, []);
      await page.goto(`${base}/dashboard/keys`);
      assert.equal(await page.locator('#key-value').count(), 0, 'the value is not shown again');
      await page.getByRole('cell', { name: 'ada@example.com' }).waitFor();

      // A daily task, created in the form.
      await page.goto(`${base}/dashboard/tasks/new`);
      await page.getByLabel('Name', { exact: true }).fill('Morning summary');
      await page.getByLabel('Prompt').fill('Summarise the news');
      await page.getByLabel('Daily').check();
      await page.getByLabel('Time', { exact: true }).fill('08:30');
      await page.getByLabel('Timezone').fill('Europe/Paris');
      await page.getByRole('button', { name: 'Create task' }).click();
      await page.waitForURL(/\/dashboard\/tasks\/[0-9a-f-]{36}(\?.*)?$/);
      await page.getByText('Task created.').waitFor();
      await page
        .getByText(/every day at 08:30/i)
        .first()
        .waitFor();

      // Run it now and watch the run page until it completes with its output.
      await page.getByRole('button', { name: 'Run now' }).click();
      await page.waitForURL(/\/dashboard\/runs\/[0-9a-f-]{36}(\?.*)?$/);
      await page.locator('.output h2').waitFor({ timeout: 20_000 });
      assert.equal(await page.locator('.output h2').textContent(), 'Morning summary');
      assert.equal(await page.locator('.output strong').textContent(), 'good');
      await page.getByText('completed').first().waitFor();
      const viaApi = await api(`/api/svc/runs?organizationId=${organizationId}`, key);
      assert.equal(viaApi.body[0].status, 'completed');

      // Revoke the key: the API refuses it.
      await page.goto(`${base}/dashboard/keys`);
      await page.getByRole('button', { name: 'Revoke e2e script' }).click();
      await page.getByText('The key is revoked').waitFor();
      const refused = await api(`/api/svc/tasks?organizationId=${organizationId}`, key);
      assert.equal(refused.status, 401);

      // Signing out ends the session: the dashboard asks to sign in again.
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.goto(`${base}/dashboard/tasks`);
      await page.waitForURL(/\/login/);
      assert.deepEqual(violations, [], 'CSP violations');
    } finally {
      await page.close();
    }
  });
});
