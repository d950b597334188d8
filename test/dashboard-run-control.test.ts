// Cancel and replay in the dashboard, in a real browser (Debian's Chromium): a running run is
// canceled from its page, and a finished run is replayed with another model of the catalog,
// whose page then shows the replay beside the original.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { signUp } from '../src/domain/users.ts';
import { launchBrowser } from './helpers/browser.ts';
import { type ModelServer, startModelServer } from './helpers/model-server.ts';
import { startTestService, type TestService } from './helpers/service.ts';

const OTHER_MODEL = 'anthropic/claude-sonnet-4.5';

let browser: Browser;
let context: BrowserContext;
let svc: TestService;
let model: ModelServer;
let base: string;
let csrf: string;
let cookie: string;

// The service and the browser are started and closed around this file's tests: a top-level
// before/after would run around the whole batch of files that shares the test process.
describe('cancel and replay in the dashboard in Chromium', () => {
  before(async () => {
    model = await startModelServer((req) => {
      const prompt = req.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
      if (prompt.startsWith('Slow')) return { endless: 'slow words ', trickleMs: 20 };
      return { content: `Answer of ${req.body.model} to: ${prompt}` };
    });
    svc = await startTestService({
      listen: true,
      startLoops: true,
      env: { SVC_MODEL_BASE_URL: model.url, SVC_MODEL_API_KEY: 'sk-test', HOST: '127.0.0.1' },
    });
    assert.ok(svc.service.url, 'the service listens');
    base = svc.service.url;
    const made = await signUp(svc.service.deps, {
      email: `ada-${randomUUID()}@example.com`,
      password: 'correct horse battery',
      organizationName: 'Replays',
    });
    csrf = made.session.csrfToken;
    cookie = `svc_session=${made.session.token}`;
    browser = await launchBrowser();
    context = await browser.newContext();
    await context.addCookies([{ name: 'svc_session', value: made.session.token, url: base }]);
  });
  after(async () => {
    await context?.close();
    await browser?.close();
    await svc?.close();
    await model?.close();
  });

  /** A daily task made through the dashboard's form; returns its id. */
  async function newTask(prompt: string): Promise<string> {
    const res = await svc.app.inject({
      method: 'POST',
      url: '/dashboard/tasks',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({
        _csrf: csrf,
        name: prompt,
        prompt,
        mode: 'daily',
        scheduleTime: '08:30',
        timezone: 'UTC',
        cronExpression: '',
        destRows: '0',
      }).toString(),
    });
    assert.equal(res.statusCode, 303, res.body.slice(0, 500));
    const id = /\/dashboard\/tasks\/([0-9a-f-]{36})/.exec(String(res.headers.location))?.[1];
    assert.ok(id);
    return id;
  }

  /** A page that records what the Content-Security-Policy refused. */
  async function newPage(violations: string[]): Promise<Page> {
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (/content security policy/i.test(msg.text())) violations.push(`${page.url()}: ${msg.text()}`);
    });
    return page;
  }

  test('a running run is canceled from its page, which then shows it failed and canceled', async () => {
    const violations: string[] = [];
    const page = await newPage(violations);
    const taskId = await newTask(`Slow ${randomUUID()}`);
    await page.goto(`${base}/dashboard/tasks/${taskId}`);
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.waitForURL(/\/dashboard\/runs\/[0-9a-f-]{36}$/);
    const runId = /runs\/([0-9a-f-]{36})/.exec(page.url())?.[1] ?? '';
    // The page reloads itself every 2 s until the run is streaming.
    await page.locator('.badge', { hasText: 'running' }).first().waitFor({ timeout: 20_000 });
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await page.waitForURL(new RegExp(`/dashboard/runs/${runId}\\?done=canceled$`));
    await page.getByText('The run was canceled.').waitFor();
    await page.getByRole('alert').filter({ hasText: 'Canceled by request' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Cancel run' }).count(), 0, 'no Cancel once ended');
    const [row] = await svc.testDb.db.query<{ status: string; canceled_at: Date | null }>(
      'SELECT status, canceled_at FROM runs WHERE id = $1',
      [runId],
    );
    assert.equal(row?.status, 'failed');
    assert.ok(row?.canceled_at);
    assert.deepEqual(violations, []);
    await page.close();
  });

  test('a finished run is replayed with another model, and the replay is shown beside the original', async () => {
    const violations: string[] = [];
    const page = await newPage(violations);
    const prompt = `Brief ${randomUUID()}`;
    const taskId = await newTask(prompt);
    await page.goto(`${base}/dashboard/tasks/${taskId}`);
    await page.getByRole('button', { name: 'Run now' }).click();
    await page.waitForURL(/\/dashboard\/runs\/[0-9a-f-]{36}$/);
    const originalId = /runs\/([0-9a-f-]{36})/.exec(page.url())?.[1] ?? '';
    await page.locator('.output').getByText(`to: ${prompt}`).waitFor({ timeout: 20_000 });

    // The model picker offers the catalog, the task's model chosen.
    const picker = page.getByLabel('Replay with');
    const chosen = await picker.inputValue();
    assert.equal(chosen, svc.service.deps.models.defaultModel.routerModelId);
    assert.ok((await picker.locator('option').count()) > 1);
    await picker.selectOption(OTHER_MODEL);
    await page.getByRole('button', { name: 'Replay' }).click();
    await page.waitForURL(
      (url) => /\/dashboard\/runs\/[0-9a-f-]{36}$/.test(url.pathname) && !url.pathname.includes(originalId),
    );
    await page.getByText(/A replay of/).waitFor();
    const table = page.locator('table.comparison');
    await table
      .locator('td[data-run="replay"] .output')
      .getByText(`Answer of ${OTHER_MODEL}`)
      .waitFor({ timeout: 20_000 });
    await table.locator('td[data-run="original"] .output').getByText(`Answer of ${chosen}`).waitFor();
    assert.equal(
      await table
        .locator('th[scope="row"]')
        .allTextContents()
        .then((t) => t.join(',')),
      'Status,Model,Tokens,Cost,Duration,Output',
    );
    assert.match(
      (await table.locator('tr', { hasText: 'Model' }).textContent()) ?? '',
      new RegExp(OTHER_MODEL.replace('.', '\\.')),
    );
    assert.equal(
      await table.getByRole('link', { name: 'Original run' }).getAttribute('href'),
      `/dashboard/runs/${originalId}`,
    );
    assert.deepEqual(violations, []);
    await page.close();
  });

  test('the cancel and replay forms are refused without the CSRF token', async () => {
    const taskId = await newTask(`Plain ${randomUUID()}`);
    const run = await svc.app.inject({
      method: 'POST',
      url: `/dashboard/tasks/${taskId}/run`,
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf: csrf }).toString(),
    });
    const runId = /runs\/([0-9a-f-]{36})/.exec(String(run.headers.location))?.[1] ?? '';
    assert.ok(runId);
    for (const action of ['cancel', 'replay']) {
      const res = await svc.app.inject({
        method: 'POST',
        url: `/dashboard/runs/${runId}/${action}`,
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'model=openai%2Fgpt-5',
      });
      assert.equal(res.statusCode, 403, `${action}: ${res.body.slice(0, 300)}`);
    }
  });
});
