// The task form's run checks in a real browser (Debian's Chromium): a cost cap, an output
// schema typed as JSON and required tools are saved and shown on the task page; text that is
// not JSON is refused with the form shown again, what was typed kept; emptied fields clear.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { launchBrowser, signedInPage } from './helpers/browser.ts';
import { startTestService, type TestService } from './helpers/service.ts';

let browser: Browser;
let svc: TestService;
let base: string;

// The service and the browser are started and closed around this file's tests: a top-level
// before/after would run around the whole batch of files that shares the test process.
describe("the task form's run checks in Chromium", () => {
  before(async () => {
    svc = await startTestService({ listen: true, env: { HOST: '127.0.0.1' } });
    assert.ok(svc.service.url, 'the service listens');
    base = svc.service.url;
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
  });

  /** A page signed in as a new person of a new organization. */
  const newSignedInPage = () => signedInPage(browser, svc, base, 'Checks Inc');

  const SCHEMA = '{\n  "type": "object",\n  "required": ["title"]\n}';

  test('run checks are set in the task form, shown on the task page, refused when the schema is not JSON, and cleared', async () => {
    const page = await newSignedInPage();
    const violations: string[] = [];
    page.on('console', (msg) => {
      if (/content security policy/i.test(msg.text())) violations.push(msg.text());
    });
    try {
      await page.goto(`${base}/dashboard/tasks/new`);
      await page.getByLabel('Name', { exact: true }).fill('Checked report');
      await page.getByLabel('Prompt').fill('Report as JSON');
      await page.getByLabel('Daily').check();
      await page.getByLabel('Max cost per run (cents)').fill('2.5');
      await page.getByLabel('Output schema (JSON Schema)').fill(SCHEMA);
      await page.getByLabel('Required tools').fill('builtin__current_time, fetch_url');
      await page.getByRole('button', { name: 'Create task' }).click();
      await page.waitForURL(/\/dashboard\/tasks\/[0-9a-f-]{36}(\?.*)?$/);
      await page.getByText('Task created.').waitFor();
      const row = (name: string) => page.getByRole('row', { name: new RegExp(`^${name}`) });
      assert.match((await row('Max cost per run').textContent()) ?? '', /2\.5 cents/);
      assert.deepEqual(JSON.parse((await page.locator('#output-schema').textContent()) ?? ''), {
        type: 'object',
        required: ['title'],
      });
      assert.match((await row('Required tools').textContent()) ?? '', /builtin__current_time, fetch_url/);
      const taskUrl = page.url().replace(/\?.*$/, '');

      // Text that is not JSON: the form again, with the problem named and the text as typed.
      await page.getByRole('link', { name: 'Edit' }).click();
      await page.waitForURL(/\/edit$/);
      assert.equal(await page.getByLabel('Max cost per run (cents)').inputValue(), '2.5');
      await page.getByLabel('Output schema (JSON Schema)').fill('{"type": "object",');
      await page.getByRole('button', { name: 'Save task' }).click();
      await page.getByRole('alert').waitFor();
      const alert = (await page.getByRole('alert').textContent()) ?? '';
      assert.match(alert, /Output schema: is not valid JSON/);
      assert.equal(await page.getByLabel('Output schema (JSON Schema)').inputValue(), '{"type": "object",');
      assert.equal(await page.getByLabel('Output schema (JSON Schema)').getAttribute('aria-invalid'), 'true');

      // A schema the API cannot compile: its problem, from the API's own check.
      await page.getByLabel('Output schema (JSON Schema)').fill('{"type": "nothing"}');
      await page.getByRole('button', { name: 'Save task' }).click();
      await page.getByRole('alert').waitFor();
      assert.match(
        (await page.getByRole('alert').textContent()) ?? '',
        /Output schema: is not a valid JSON Schema/,
      );

      // Emptied fields clear their checks.
      await page.getByLabel('Max cost per run (cents)').fill('');
      await page.getByLabel('Output schema (JSON Schema)').fill('');
      await page.getByLabel('Required tools').fill('');
      await page.getByRole('button', { name: 'Save task' }).click();
      await page.waitForURL(`${taskUrl}?done=saved`);
      for (const name of ['Max cost per run', 'Output schema', 'Required tools'])
        assert.match((await row(name).textContent()) ?? '', /none/, name);
      assert.deepEqual(violations, []);
    } finally {
      await page.context().close();
    }
  });
});
