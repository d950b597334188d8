// The task page's slot timeline and upcoming slots, and the form's monthly cost limit, in
// Chromium against a listening service on a manual clock (the scheduler is ticked by the test).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { ManualClock } from '../src/lib/clock.ts';
import { launchBrowser, signedInPage } from './helpers/browser.ts';
import { startTestService, type TestService } from './helpers/service.ts';

// Two days before Berlin's clocks go forward (2026-03-29, 02:00 → 03:00).
const clock = new ManualClock('2026-03-27T12:00:00Z');
let svc: TestService;
let browser: Browser;
let base: string;

// The service and the browser are started and closed around this file's tests: a top-level
// before/after would run around the whole batch of files that shares the test process.
describe("the task page's slots and cost limit in Chromium", () => {
  before(async () => {
    svc = await startTestService({ listen: true, clock, env: { HOST: '127.0.0.1' } });
    assert.ok(svc.service.url);
    base = svc.service.url;
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
  });

  test('the task page shows upcoming slots with local times and DST notes, and a timeline of what each slot became; the form sets and clears the cost limit', async () => {
    const page: Page = await signedInPage(browser, svc, base, 'Acme');
    const violations: string[] = [];
    page.on('console', (msg) => {
      if (/content security policy/i.test(msg.text())) violations.push(msg.text());
    });

    await page.goto(`${base}/dashboard/tasks/new`);
    await page.getByLabel('Name', { exact: true }).fill('Night digest');
    await page.getByLabel('Prompt').fill('Summarise the night');
    await page.getByLabel('Daily').check();
    await page.getByLabel('Time', { exact: true }).fill('02:30');
    await page.getByLabel('Timezone').fill('Europe/Berlin');
    await page.getByLabel('Monthly cost limit (cents)').fill('250');
    await page.getByRole('button', { name: 'Create task' }).click();
    await page.waitForURL(/\/dashboard\/tasks\/[0-9a-f-]{36}(\?.*)?$/);
    const taskId = /tasks\/([0-9a-f-]{36})/.exec(page.url())?.[1] ?? '';
    const [row] = await svc.service.deps.db.query<{ limit: number }>(
      'SELECT monthly_cost_limit_cents AS limit FROM tasks WHERE id = $1',
      [taskId],
    );
    assert.equal(row?.limit, 250);

    // Upcoming: local times with offsets, the spring-forward slot moved and said so.
    const upcoming = page.locator('#upcoming-slots li');
    assert.equal(await upcoming.count(), 5);
    assert.match((await upcoming.nth(0).textContent()) ?? '', /2026-03-28T02:30:00\+01:00/);
    const moved = (await upcoming.nth(1).textContent()) ?? '';
    assert.match(moved, /2026-03-29T03:00:00\+02:00/);
    assert.match(moved, /02:30 does not exist on 2026-03-29 in Europe\/Berlin/);
    await page.getByText('No slot has come yet.').waitFor();

    // Two slots pass: the first runs, the second finds it still pending (overlap).
    const scheduler = svc.service.scheduler;
    assert.ok(scheduler);
    clock.set('2026-03-28T01:30:00Z');
    await scheduler.tick();
    clock.set('2026-03-29T01:00:00Z');
    await scheduler.tick();
    await page.reload();
    const rows = page.locator('#slot-timeline tbody tr');
    assert.equal(await rows.count(), 2);
    assert.equal(await rows.nth(0).getAttribute('data-outcome'), 'skipped_overlap');
    assert.match(
      (await rows.nth(0).textContent()) ?? '',
      /previous run of the task was still pending or running/,
    );
    assert.equal(await rows.nth(1).getAttribute('data-outcome'), 'ran');
    await rows.nth(1).getByRole('link', { name: 'view run' }).click();
    await page.waitForURL(/\/dashboard\/runs\/[0-9a-f-]{36}(\?.*)?$/);

    // The edit form shows the limit; emptied, the limit is cleared.
    await page.goto(`${base}/dashboard/tasks/${taskId}/edit`);
    const limit = page.getByLabel('Monthly cost limit (cents)');
    assert.equal(await limit.inputValue(), '250');
    await limit.fill('');
    await page.getByRole('button', { name: 'Save task' }).click();
    await page.waitForURL(new RegExp(`/dashboard/tasks/${taskId}(\\?.*)?$`));
    const [cleared] = await svc.service.deps.db.query<{ limit: number | null }>(
      'SELECT monthly_cost_limit_cents AS limit FROM tasks WHERE id = $1',
      [taskId],
    );
    assert.equal(cleared?.limit, null);

    // A limit that is not a number is refused with the form shown again, naming the field.
    await page.goto(`${base}/dashboard/tasks/${taskId}/edit`);
    await page.getByLabel('Monthly cost limit (cents)').fill('lots');
    await page.getByRole('button', { name: 'Save task' }).click();
    await page
      .getByText(/Monthly cost limit/)
      .first()
      .waitFor();
    assert.deepEqual(violations, []);
    await page.context().close();
  });
});
