// The dashboard's part on unattended runs in a real browser (Debian's Chromium): the task form's
// failure and delivery settings, the task page's pause reason, failed runs in a row and notices,
// and a run page's suppressed deliveries. The service listens with its worker and dispatcher, a
// local model server answers, and a local receiver takes the webhooks.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, signedInPage } from './helpers/browser.ts';
import { type ModelServer, startModelServer } from './helpers/model-server.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

let browser: Browser;
let svc: TestService;
let model: ModelServer;
let hook: WebhookReceiver;
let base: string;

// The service and the browser are started and closed around this file's tests: a top-level
// before/after would run around the whole batch of files that shares the test process.
describe('unattended runs in the dashboard in Chromium', () => {
  before(async () => {
    model = await startModelServer((req) => {
      const prompt = req.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
      return prompt.startsWith('fail')
        ? { status: 400, error: 'model does not exist' }
        : { content: 'Same output' };
    });
    hook = await startWebhookReceiver();
    svc = await startTestService({
      listen: true,
      startLoops: true,
      env: {
        SVC_MODEL_BASE_URL: model.url,
        SVC_MODEL_API_KEY: 'sk-test',
        HOST: '127.0.0.1',
        SVC_ALLOW_PRIVATE_URLS: 'true',
      },
    });
    assert.ok(svc.service.url, 'the service listens');
    base = svc.service.url;
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
    await model?.close();
    await hook?.close();
  });

  /** A page signed in as a new person of a new organization. */
  const newSignedInPage = () => signedInPage(browser, svc, base, 'Acme Research');

  /** Creates a task in the form and returns its page's URL. */
  async function createTask(
    page: Page,
    o: { name: string; prompt: string; pauseAfter: string; sends: RegExp },
  ) {
    await page.goto(`${base}/dashboard/tasks/new`);
    await page.getByLabel('Name', { exact: true }).fill(o.name);
    await page.getByLabel('Prompt').fill(o.prompt);
    await page.getByLabel('Pause after this many failed runs in a row').fill(o.pauseAfter);
    await page.getByLabel(o.sends).check();
    await page.getByLabel('Destination 1 type').selectOption('webhook');
    await page.getByLabel('Destination 1 value').fill(hook.url);
    await page.getByRole('button', { name: 'Create task' }).click();
    await page.waitForURL(/\/dashboard\/tasks\/[0-9a-f-]{36}(\?.*)?$/);
    return page.url().replace(/\?.*$/, '');
  }

  /** Runs the task from its page and waits on the run page until the run and its delivery are done. */
  async function runFromPage(page: Page, taskUrl: string): Promise<string> {
    await page.goto(taskUrl);
    await page.getByRole('button', { name: 'Run now' }).first().click();
    await page.waitForURL(/\/dashboard\/runs\/[0-9a-f-]{36}/);
    const runUrl = page.url().replace(/\?.*$/, '');
    await waitFor('the run and its delivery to end', async () => {
      await page.goto(runUrl);
      return (await page.getByRole('status').filter({ hasText: 'updates itself' }).count()) === 0
        ? true
        : undefined;
    });
    return runUrl;
  }

  test('a task set to pause after one failure shows why it paused, its failed runs and the notice, and resuming clears them', async () => {
    const page = await newSignedInPage();
    const taskUrl = await createTask(page, {
      name: 'Fragile report',
      prompt: 'fail every time',
      pauseAfter: '1',
      sends: /Only failed runs/,
    });
    assert.equal(await page.locator('#consecutive-failures').textContent(), '0');
    await page.getByRole('cell', { name: '1 failed runs in a row' }).waitFor();
    await page.getByRole('cell', { name: 'Only failed runs' }).waitFor();
    assert.equal(await page.locator('#paused-reason').count(), 0);

    await runFromPage(page, taskUrl);
    await page.goto(taskUrl);
    const reason = (await page.locator('#paused-reason').textContent()) ?? '';
    assert.match(reason, /^Paused after 1 consecutive failed runs; the last failed with: \S/);
    assert.equal(await page.locator('#consecutive-failures').textContent(), '1');
    await page.locator('h1 .badge', { hasText: 'paused' }).waitFor();
    const notice = page.locator('#task-notices tbody tr');
    await waitFor('the notice to be delivered', async () => {
      await page.goto(taskUrl);
      return (await notice.first().textContent())?.includes('delivered') ? true : undefined;
    });
    assert.equal(await notice.count(), 1, 'one notice, to the one destination');
    const row = (await notice.first().textContent()) ?? '';
    assert.ok(row.includes('task.paused') && row.includes(`webhook: ${hook.url}`), row);

    // The form shows the settings as saved.
    await page.goto(`${taskUrl}/edit`);
    assert.equal(await page.getByLabel('Pause after this many failed runs in a row').inputValue(), '1');
    assert.ok(await page.getByLabel(/Only failed runs/).isChecked());

    await page.goto(taskUrl);
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.waitForURL(/done=active/);
    assert.equal(await page.locator('#paused-reason').count(), 0);
    assert.equal(await page.locator('#consecutive-failures').textContent(), '0');
    await page.context().close();
  });

  test('a run whose output did not change shows its delivery as suppressed, and an invalid count is refused in the form', async () => {
    const page = await newSignedInPage();
    const taskUrl = await createTask(page, {
      name: 'Quiet digest',
      prompt: 'summarise',
      pauseAfter: '5',
      sends: /Only when the output changed/,
    });
    const first = await runFromPage(page, taskUrl);
    await page.goto(first);
    await page.locator('h3 .badge', { hasText: 'delivered' }).waitFor();

    const second = await runFromPage(page, taskUrl);
    await page.goto(second);
    await page.locator('h3 .badge', { hasText: 'suppressed' }).waitFor();
    assert.ok((await page.textContent('main'))?.includes('Not sent: the task sends only changed outputs'));

    await page.goto(`${taskUrl}/edit`);
    await page.getByLabel('Pause after this many failed runs in a row').fill('500');
    // The browser's own check would stop the form first; the server's is what is under test.
    await page.locator('#task-form').evaluate((form) => form.setAttribute('novalidate', ''));
    await page.getByRole('button', { name: 'Save task' }).click();
    await page.getByRole('alert').filter({ hasText: 'autoPauseAfterFailures' }).waitFor();
    assert.equal(
      await page.getByLabel('Pause after this many failed runs in a row').getAttribute('aria-invalid'),
      'true',
    );
    await page.context().close();
  });
});
