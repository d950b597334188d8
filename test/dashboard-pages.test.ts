// The dashboard's resource pages (tasks, runs, skills, sources) through app.inject: what a
// signed-in person sees and can do, forms that fail with the API's own messages, and pages of
// another organization that are not found.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach, describe, test } from 'node:test';
import { findSource } from '../src/db/sql/sources.ts';
import { openSourceSecrets } from '../src/domain/sources.ts';
import { signUp } from '../src/domain/users.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { startTestService, type TestService } from './helpers/service.ts';

// A Monday, 08:00 in Paris (CET, UTC+1).
const NOW = '2027-03-08T07:00:00.000Z';

interface Person {
  token: string;
  csrf: string;
  organizationId: string;
}

describe('dashboard pages', () => {
  let svc: TestService;
  let alice: Person;
  let bob: Person;

  const person = async (n: string): Promise<Person> => {
    const made = await signUp(svc.service.deps, {
      email: `${n}-${randomUUID()}@example.com`,
      password: 'correct horse battery',
      organizationName: `${n}'s organization`,
    });
    return { token: made.session.token, csrf: made.session.csrfToken, organizationId: made.organizationId };
  };
  before(async () => {
    svc = await startTestService({ clock: new ManualClock(NOW) });
    bob = await person('bob');
  });
  // Each test has its own person and organization: none depends on what another left behind.
  beforeEach(async () => {
    alice = await person('alice');
  });
  after(() => svc.close());

  const get = (who: Person | undefined, url: string) =>
    svc.app.inject({ method: 'GET', url, headers: who ? { cookie: `svc_session=${who.token}` } : {} });

  /** A form post; `_csrf` is the person's unless `csrf: false`. */
  const post = (who: Person, url: string, form: Record<string, string | string[]> = {}, csrf = true) => {
    const body = new URLSearchParams();
    if (csrf) body.append('_csrf', who.csrf);
    for (const [k, v] of Object.entries(form)) for (const x of [v].flat()) body.append(k, x);
    return svc.app.inject({
      method: 'POST',
      url,
      headers: { cookie: `svc_session=${who.token}`, 'content-type': 'application/x-www-form-urlencoded' },
      payload: body.toString(),
    });
  };

  /** The flash of a page, for assertion messages (the whole page is too long to read). */
  const flashOf = (body: string) =>
    /<div class="flash[^"]*"[^>]*>[\s\S]*?<\/div>/.exec(body)?.[0] ?? body.slice(0, 300);

  const weeklyTask = {
    name: 'Paris <b>briefing</b>',
    prompt: 'Summarise the news.',
    mode: 'weekly',
    scheduleTime: '08:30',
    scheduleDays: ['monday', 'wednesday'],
    timezone: 'Europe/Paris',
    cronExpression: '',
    destRows: '3',
    dest0Type: 'email',
    dest0Value: 'team@example.com',
    dest0Label: 'Team',
    dest1Type: 'email',
    dest1Value: '',
    dest1Label: '',
  };

  /** The id in a redirect to a created resource's page. */
  const createdId = (res: { statusCode: number; body: string; headers: Record<string, unknown> }) => {
    assert.equal(res.statusCode, 303, flashOf(res.body));
    const id = /\/([0-9a-f-]{36})(\?|$)/.exec(String(res.headers.location))?.[1];
    assert.ok(id, String(res.headers.location));
    return id;
  };
  const newTask = async (who: Person, fields: Record<string, string> = {}) =>
    createdId(await post(who, '/dashboard/tasks', { ...weeklyTask, ...fields }));
  const newRun = async (who: Person, taskId: string) =>
    createdId(await post(who, `/dashboard/tasks/${taskId}/run`));

  test('an anonymous visit is sent to the sign-in page', async () => {
    for (const url of [
      '/dashboard/tasks',
      '/dashboard/runs',
      '/dashboard/skills/new',
      '/dashboard/sources',
    ]) {
      const res = await get(undefined, url);
      assert.equal(res.statusCode, 303, url);
      assert.equal(res.headers.location, `/login?next=${encodeURIComponent(url)}`);
    }
  });

  test('the task list and the new-task form', async () => {
    const list = await get(alice, '/dashboard/tasks');
    assert.equal(list.statusCode, 200);
    assert.match(list.body, /No tasks yet/);
    assert.match(list.body, /href="\/dashboard\/tasks\/new"/);

    const form = await get(alice, '/dashboard/tasks/new');
    assert.equal(form.statusCode, 200);
    assert.match(form.body, /<select id="model" name="model"/);
    assert.match(form.body, /<optgroup label="/);
    assert.match(form.body, /\(default\)<\/option>/);
    assert.match(form.body, /<datalist id="timezones">.*<option value="Europe\/Paris">/s);
    assert.match(form.body, /type="time"/);
    assert.match(form.body, /name="scheduleDays" value="monday"/);
    assert.match(form.body, /id="schedule-preview" aria-live="polite"/);
    assert.match(form.body, /name="_csrf" value="/);
    // The default schedule (daily at 09:00 UTC) is previewed server-side: five slots.
    assert.equal(form.body.match(/<li><time datetime=/g)?.length, 5);
  });

  test('a weekly task in a timezone is created; its page tells the schedule in words and the next run', async () => {
    const created = await post(alice, '/dashboard/tasks', weeklyTask);
    assert.equal(created.statusCode, 303, flashOf(created.body));
    const location = String(created.headers.location);
    const m = /^\/dashboard\/tasks\/([0-9a-f-]{36})\?done=created$/.exec(location);
    assert.ok(m, location);
    const taskId = m[1] as string;

    const view = await get(alice, location);
    assert.equal(view.statusCode, 200);
    assert.match(view.body, /Task created\./);
    assert.match(view.body, /Paris &lt;b&gt;briefing&lt;\/b&gt;/);
    assert.ok(!view.body.includes('<b>briefing</b>'));
    assert.match(view.body, /Weekly on Mon, Wed at 08:30 \(Europe\/Paris\)/);
    // Next run: that Monday at 08:30 Paris time, shown in the task's timezone.
    assert.match(view.body, /<time datetime="2027-03-08T07:30:00.000Z">Mon, 8 Mar 2027, 08:30 CET<\/time>/);
    assert.match(view.body, /team@example.com/);
    assert.match(view.body, /action="\/dashboard\/tasks\/[0-9a-f-]{36}\/run"/);
    assert.match(view.body, /No runs yet/);

    const list = await get(alice, '/dashboard/tasks');
    assert.match(list.body, /Weekly on Mon, Wed at 08:30 \(Europe\/Paris\)/);
    assert.match(list.body, /Mon, 8 Mar 2027, 08:30 CET/);

    // The edit form holds the saved values and previews the saved schedule's next five runs.
    const edit = await get(alice, `/dashboard/tasks/${taskId}/edit`);
    assert.equal(edit.statusCode, 200);
    assert.match(edit.body, /name="mode" value="weekly" checked/);
    assert.match(edit.body, /name="scheduleDays" value="wednesday" checked/);
    assert.match(edit.body, /value="Europe\/Paris"/);
    const slots = [...edit.body.matchAll(/<li><time datetime="([^"]+)">/g)].map((x) => x[1]);
    assert.deepEqual(slots, [
      '2027-03-08T07:30:00.000Z',
      '2027-03-10T07:30:00.000Z',
      '2027-03-15T07:30:00.000Z',
      '2027-03-17T07:30:00.000Z',
      '2027-03-22T07:30:00.000Z',
    ]);
  });

  test('a bad form is shown again with its values and every problem, status 400', async () => {
    const taskId = await newTask(alice);
    const res = await post(alice, '/dashboard/tasks', {
      ...weeklyTask,
      name: '',
      prompt: 'Keep me',
      mode: 'cron',
      cronExpression: '99 9 * * *',
    });
    assert.equal(res.statusCode, 400);
    assert.match(res.body, /class="flash error" role="alert"/);
    assert.match(res.body, /<strong>Name<\/strong>: must not be empty/);
    assert.match(
      res.body,
      /<strong>Cron expression<\/strong>: invalid minute field &#39;99&#39;: 99 is out of range 0-59/,
    );
    assert.match(res.body, /Keep me<\/textarea>/);
    assert.match(res.body, /value="99 9 \* \* \*"/);
    assert.match(res.body, /id="name" name="name"[^>]*aria-invalid="true"/);

    // A rule only the domain knows (a destination value that does not fit its type) too.
    const bad = await post(alice, '/dashboard/tasks', {
      ...weeklyTask,
      dest0Type: 'sms',
      dest0Value: 'not a number',
    });
    assert.equal(bad.statusCode, 400);
    assert.match(bad.body, /<strong>Destination #1 value<\/strong>: must be a phone number in E.164 form/);

    const edit = await post(alice, `/dashboard/tasks/${taskId}`, { ...weeklyTask, timezone: 'Mars/Olympus' });
    assert.equal(edit.statusCode, 400);
    assert.match(edit.body, /<strong>Timezone<\/strong>: is not an IANA timezone name/);
  });

  test('the schedule preview fragment shows the next five slots of a cron expression', async () => {
    const q = new URLSearchParams({ mode: 'cron', cronExpression: '0 9 * * 1-5', timezone: 'UTC' });
    const res = await get(alice, `/dashboard/schedule-preview?${q}`);
    assert.equal(res.statusCode, 200);
    assert.ok(!res.body.includes('<html'), 'a fragment, not a page');
    const slots = [...res.body.matchAll(/<time datetime="([^"]+)">/g)].map((x) => x[1]);
    assert.deepEqual(slots, [
      '2027-03-08T09:00:00.000Z',
      '2027-03-09T09:00:00.000Z',
      '2027-03-10T09:00:00.000Z',
      '2027-03-11T09:00:00.000Z',
      '2027-03-12T09:00:00.000Z',
    ]);
    const bad = await get(
      alice,
      `/dashboard/schedule-preview?${new URLSearchParams({ mode: 'cron', cronExpression: '0 0 31 2 *', timezone: 'UTC' })}`,
    );
    assert.match(bad.body, /No preview: .*never matches a date/);
    const anonymous = await get(undefined, `/dashboard/schedule-preview?${q}`);
    assert.equal(anonymous.statusCode, 401);
    assert.equal(anonymous.body, '');
  });

  test('a task is edited, paused and resumed; the cron schedule is told in words', async () => {
    const taskId = await newTask(alice);
    const saved = await post(alice, `/dashboard/tasks/${taskId}`, {
      ...weeklyTask,
      name: 'Paris briefing',
      mode: 'cron',
      cronExpression: '0 9 * * 1-5',
      timezone: 'UTC',
      destRows: '1',
      dest0Value: 'team@example.com',
    });
    assert.equal(saved.statusCode, 303, flashOf(saved.body));
    assert.equal(saved.headers.location, `/dashboard/tasks/${taskId}?done=saved`);
    const view = await get(alice, `/dashboard/tasks/${taskId}`);
    assert.match(view.body, /Cron <code>0 9 \* \* 1-5<\/code> \(UTC\)/);
    assert.match(view.body, /<time datetime="2027-03-08T09:00:00.000Z">/);

    const paused = await post(alice, `/dashboard/tasks/${taskId}/status`, { status: 'paused' });
    assert.equal(paused.statusCode, 303);
    const pausedView = await get(alice, String(paused.headers.location));
    assert.match(pausedView.body, /Task paused\./);
    assert.match(pausedView.body, /<span class="badge paused">paused<\/span>/);
    assert.match(pausedView.body, /<button type="submit" class="secondary">Resume<\/button>/);

    const resumed = await post(alice, `/dashboard/tasks/${taskId}/status`, { status: 'active' });
    assert.equal(resumed.statusCode, 303);
    assert.match(String(resumed.headers.location), /done=active$/);
  });

  test('run now leads to the run page, which refreshes itself while the run is pending', async () => {
    const taskId = await newTask(alice, { name: 'Paris briefing' });
    const res = await post(alice, `/dashboard/tasks/${taskId}/run`);
    assert.equal(res.statusCode, 303, flashOf(res.body));
    const m = /^\/dashboard\/runs\/([0-9a-f-]{36})$/.exec(String(res.headers.location));
    assert.ok(m, String(res.headers.location));
    const runId = m[1] as string;

    const view = await get(alice, `/dashboard/runs/${runId}`);
    assert.equal(view.statusCode, 200);
    assert.match(view.body, /<meta http-equiv="refresh" content="2">/);
    assert.match(view.body, /<span class="badge pending">pending<\/span>/);
    assert.match(view.body, /No output yet/);

    // A second run while this one is pending: the conflict is shown on the task page.
    const again = await post(alice, `/dashboard/tasks/${taskId}/run`);
    assert.equal(again.statusCode, 409);
    assert.match(again.body, /already pending or running/);

    const runs = await get(alice, '/dashboard/runs?limit=500');
    assert.equal(runs.statusCode, 200);
    assert.match(runs.body, /The 100 newest runs/);
    assert.match(runs.body, new RegExp(`href="/dashboard/runs/${runId}"`));
    assert.match(runs.body, /Paris briefing<\/a>/);
  });

  test('a finished run shows its Markdown output rendered, raw HTML escaped, and stops refreshing', async () => {
    const taskId = await newTask(alice);
    const runId = await newRun(alice, taskId);
    await svc.testDb.db.query(
      `UPDATE runs SET status = 'completed', output = $2, error = NULL, tokens_used = 1234, cost_cents = 1.5,
         duration_ms = 2500, started_at = $3, completed_at = $3 WHERE id = $1`,
      [
        runId,
        '# Headlines\n\n**Markets** are up.\n\n<script>alert(1)</script>\n\n[click](javascript:alert(1))',
        new Date(NOW),
      ],
    );
    const view = await get(alice, `/dashboard/runs/${runId}`);
    assert.equal(view.statusCode, 200);
    assert.ok(!view.body.includes('http-equiv="refresh"'));
    assert.match(view.body, /<div class="output"><h1>Headlines<\/h1>/);
    assert.match(view.body, /<strong>Markets<\/strong> are up\./);
    assert.match(view.body, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.ok(!view.body.includes('<script>alert(1)</script>'));
    assert.ok(!/href="javascript:/i.test(view.body));
    assert.match(view.body, /1,234/);
    assert.match(view.body, /\$0\.0150/);
    assert.match(view.body, /2\.5 s/);

    // A delivery that failed: its attempts are listed, and it can be retried.
    const deliveryId = randomUUID();
    await svc.testDb.db.query(
      `INSERT INTO deliveries (id, organization_id, run_id, channel, target, label, position, status, attempts,
         round_attempts, last_error, created_at, updated_at)
       VALUES ($1, $2, $3, 'webhook', 'https://hooks.example.com/x', 'Hook', 0, 'failed', 1, 1, 'HTTP 500 <oops>', $4, $4)`,
      [deliveryId, alice.organizationId, runId, new Date(NOW)],
    );
    await svc.testDb.db.query(
      `INSERT INTO delivery_attempts (delivery_id, attempt, started_at, duration_ms, outcome, status_code, error, response)
       VALUES ($1, 1, $2, 120, 'failed', 500, 'HTTP 500', '<h1>Internal</h1>')`,
      [deliveryId, new Date(NOW)],
    );
    await svc.testDb.db.query(`UPDATE runs SET delivery_status = 'failed' WHERE id = $1`, [runId]);
    const failed = await get(alice, `/dashboard/runs/${runId}`);
    assert.ok(!failed.body.includes('http-equiv="refresh"'));
    assert.match(failed.body, /webhook: https:\/\/hooks.example.com\/x/);
    assert.match(failed.body, /HTTP 500 &lt;oops&gt;/);
    assert.match(failed.body, /<td>1<\/td><td><time datetime="2027-03-08T07:00:00.000Z">/);
    assert.match(failed.body, /<td>500<\/td>/);
    assert.match(failed.body, /&lt;h1&gt;Internal&lt;\/h1&gt;/);
    assert.match(failed.body, /Retry failed deliveries<\/button>/);
    const retried = await post(alice, `/dashboard/runs/${runId}/redeliver`);
    assert.equal(retried.statusCode, 303, flashOf(retried.body));
    assert.equal(retried.headers.location, `/dashboard/runs/${runId}?done=redelivered`);
    const pending = await get(alice, String(retried.headers.location));
    assert.match(pending.body, /The failed deliveries are queued again\./);
    assert.match(pending.body, /<meta http-equiv="refresh" content="2">/);
    assert.ok(!pending.body.includes('Retry failed deliveries</button>'));
    const nothingToRetry = await post(alice, `/dashboard/runs/${runId}/redeliver`);
    assert.equal(nothingToRetry.statusCode, 409);

    const task = await get(alice, `/dashboard/tasks/${taskId}`);
    assert.match(task.body, new RegExp(`href="/dashboard/runs/${runId}"`));
    const list = await get(alice, '/dashboard/tasks');
    assert.match(list.body, /<span class="badge completed">completed<\/span>/);
  });

  test("the billing page says when the plan's run limit was reached this period", async () => {
    const before = await get(alice, '/dashboard/billing');
    assert.equal(before.statusCode, 200);
    assert.ok(!before.body.includes('runs was reached'));
    await svc.testDb.db.query('UPDATE organizations SET run_limit_reached_at = $2 WHERE id = $1', [
      alice.organizationId,
      new Date(NOW),
    ]);
    const after = await get(alice, '/dashboard/billing');
    assert.match(
      after.body,
      /The plan's limit of 200 runs was reached on 2027-03-08: until the next period, scheduled slots are skipped/,
    );
  });

  test('a skill is created, edited and deleted after a confirmation', async () => {
    const created = await post(alice, '/dashboard/skills', {
      name: 'Tone',
      description: 'House style',
      category: 'writing',
      content: 'Write **briefly**.',
      requiredSources: 'news-api, weather',
    });
    assert.equal(created.statusCode, 303, flashOf(created.body));
    const m = /^\/dashboard\/skills\/([0-9a-f-]{36})\?done=created$/.exec(String(created.headers.location));
    assert.ok(m);
    const skillId = m[1] as string;
    const view = await get(alice, `/dashboard/skills/${skillId}`);
    assert.match(view.body, /<code>news-api<\/code>, <code>weather<\/code>/);
    assert.match(view.body, /Write <strong>briefly<\/strong>\./);

    const bad = await post(alice, `/dashboard/skills/${skillId}`, { name: 'Tone', content: '' });
    assert.equal(bad.statusCode, 400);
    assert.match(bad.body, /<strong>Content<\/strong>: must not be empty/);

    const edited = await post(alice, `/dashboard/skills/${skillId}`, {
      name: 'Tone of voice',
      description: '',
      category: 'writing',
      content: 'Write briefly, and kindly.',
      requiredSources: '',
    });
    assert.equal(edited.statusCode, 303, flashOf(edited.body));
    const after = await get(alice, `/dashboard/skills/${skillId}`);
    assert.match(after.body, /<h1>Tone of voice<\/h1>/);
    assert.match(after.body, /<th scope="row">Version<\/th><td>2<\/td>/);
    const form = await get(alice, `/dashboard/skills/${skillId}/edit`);
    assert.match(form.body, /Write briefly, and kindly\.<\/textarea>/);

    const confirm = await get(alice, `/dashboard/skills/${skillId}/delete`);
    assert.equal(confirm.statusCode, 200);
    assert.match(
      confirm.body,
      new RegExp(`<form method="post" action="/dashboard/skills/${skillId}/delete"`),
    );
    const deleted = await post(alice, `/dashboard/skills/${skillId}/delete`);
    assert.equal(deleted.statusCode, 303);
    assert.equal(deleted.headers.location, '/dashboard/skills?done=deleted');
    assert.equal((await get(alice, `/dashboard/skills/${skillId}`)).statusCode, 404);
  });

  test('a local source is created and its test lists current_time', async () => {
    const created = await post(alice, '/dashboard/sources', { name: 'Clock', type: 'local' });
    assert.equal(created.statusCode, 303, flashOf(created.body));
    const m = /^\/dashboard\/sources\/([0-9a-f-]{36})\?done=created$/.exec(String(created.headers.location));
    assert.ok(m);
    const sourceId = m[1] as string;
    const before = await get(alice, `/dashboard/sources/${sourceId}`);
    assert.match(before.body, /badge inactive/);

    const tested = await post(alice, `/dashboard/sources/${sourceId}/test`);
    assert.equal(tested.statusCode, 200);
    assert.match(tested.body, /class="flash ok"/);
    assert.match(tested.body, /<code>current_time<\/code>/);
    assert.match(tested.body, /<code>fetch_url<\/code>/);

    const list = await get(alice, '/dashboard/sources');
    assert.match(
      list.body,
      /Clock<\/a><\/td><td>local<\/td>\s*<td><span class="badge active">active<\/span><\/td><td>2<\/td>/,
    );
  });

  test('source secrets are masked on the edit form and kept when the mask is sent back', async () => {
    const created = await post(alice, '/dashboard/sources', {
      name: 'Secret API',
      type: 'api',
      baseUrl: 'https://api.example.com',
      authType: 'bearer',
      token: 'tok-secret-value',
    });
    assert.equal(created.statusCode, 303, flashOf(created.body));
    const id = String(/sources\/([0-9a-f-]{36})/.exec(String(created.headers.location))?.[1]);
    const form = await get(alice, `/dashboard/sources/${id}/edit`);
    assert.ok(!form.body.includes('tok-secret-value'));
    assert.match(form.body, /placeholder="stored: leave blank to keep"/);

    // Blank token: kept (the domain receives the mask).
    const saved = await post(alice, `/dashboard/sources/${id}`, {
      name: 'Secret API',
      baseUrl: 'https://api.example.com',
      authType: 'bearer',
      token: '',
    });
    assert.equal(saved.statusCode, 303, flashOf(saved.body));
    const view = await get(alice, `/dashboard/sources/${id}`);
    assert.match(view.body, /Stored credentials<\/th><td>Token/);
    const secrets = async () => {
      const row = await findSource(svc.testDb.db, alice.organizationId, id);
      assert.ok(row);
      return openSourceSecrets(svc.service.deps, row).credentials;
    };
    assert.deepEqual(await secrets(), { token: 'tok-secret-value' });

    // "Remove" drops it.
    const cleared = await post(alice, `/dashboard/sources/${id}`, {
      name: 'Secret API',
      baseUrl: 'https://api.example.com',
      authType: 'bearer',
      token: '',
      clear: 'token',
    });
    assert.equal(cleared.statusCode, 303, flashOf(cleared.body));
    assert.deepEqual(await secrets(), {});

    const badEnv = await post(alice, '/dashboard/sources', {
      name: 'Bad',
      type: 'mcp',
      url: 'https://mcp.example.com',
      env: 'NOEQUALS\nTOKEN=********',
    });
    assert.equal(badEnv.statusCode, 400);
    assert.match(badEnv.body, /<strong>Environment variable<\/strong>: line 1 is not NAME=value/);
  });

  test("another organization's task, run, skill and source are not found", async () => {
    const taskId = await newTask(alice);
    const runId = await newRun(alice, taskId);
    const skillId = createdId(
      await post(alice, '/dashboard/skills', { name: 'Kept skill', content: 'Secret instructions' }),
    );
    const sourceId = createdId(await post(alice, '/dashboard/sources', { name: 'Clock', type: 'local' }));
    const pages = [
      `/dashboard/tasks/${taskId}`,
      `/dashboard/tasks/${taskId}/edit`,
      `/dashboard/tasks/${taskId}/delete`,
      `/dashboard/runs/${runId}`,
      `/dashboard/skills/${skillId}`,
      `/dashboard/skills/${skillId}/edit`,
      `/dashboard/sources/${sourceId}`,
      `/dashboard/sources/${sourceId}/edit`,
      '/dashboard/tasks/not-a-uuid',
    ];
    for (const url of pages) {
      const res = await get(bob, url);
      assert.equal(res.statusCode, 404, url);
      assert.ok(!/briefing|Secret instructions|Kept skill|Clock/.test(res.body), url);
    }
    for (const url of [
      `/dashboard/tasks/${taskId}/run`,
      `/dashboard/tasks/${taskId}/delete`,
      `/dashboard/runs/${runId}/redeliver`,
      `/dashboard/skills/${skillId}/delete`,
      `/dashboard/sources/${sourceId}/test`,
      `/dashboard/sources/${sourceId}/delete`,
    ]) {
      assert.equal((await post(bob, url)).statusCode, 404, url);
    }
    const bobsTasks = await get(bob, '/dashboard/tasks');
    assert.match(bobsTasks.body, /No tasks yet/);
    // Alice's resources are still there.
    assert.equal((await get(alice, `/dashboard/tasks/${taskId}`)).statusCode, 200);
    assert.equal((await get(alice, `/dashboard/sources/${sourceId}`)).statusCode, 200);
  });

  test('a form without its CSRF token is refused with 403', async () => {
    const taskId = await newTask(alice);
    const res = await post(alice, '/dashboard/tasks', weeklyTask, false);
    assert.equal(res.statusCode, 403);
    const forged = await post(alice, `/dashboard/tasks/${taskId}/delete`, { _csrf: bob.csrf }, false);
    assert.equal(forged.statusCode, 403);
    assert.equal((await get(alice, `/dashboard/tasks/${taskId}`)).statusCode, 200);
  });

  test('a task is deleted after a confirmation page, with its runs', async () => {
    const taskId = await newTask(alice);
    const runId = await newRun(alice, taskId);
    const confirm = await get(alice, `/dashboard/tasks/${taskId}/delete`);
    assert.equal(confirm.statusCode, 200);
    assert.match(confirm.body, /class="danger">Delete task<\/button>/);
    const res = await post(alice, `/dashboard/tasks/${taskId}/delete`);
    assert.equal(res.statusCode, 303);
    assert.equal(res.headers.location, '/dashboard/tasks?done=deleted');
    assert.equal((await get(alice, `/dashboard/tasks/${taskId}`)).statusCode, 404);
    assert.equal((await get(alice, `/dashboard/runs/${runId}`)).statusCode, 404);
  });

  test('at the cap of keys not revoked, creating a key shows the page again with the reason, status 403', async () => {
    const cap = svc.config.orgCaps.apiKeys;
    const count = async () =>
      (
        await svc.testDb.db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM api_keys WHERE organization_id = $1',
          [alice.organizationId],
        )
      )[0]?.n ?? 0;
    const have = await count();
    for (let i = have; i < cap - 1; i++) {
      await svc.testDb.db.query(
        `INSERT INTO api_keys (id, organization_id, name, key_hash, display_prefix)
         VALUES (gen_random_uuid(), $1, $2, md5(random()::text) || md5(random()::text), 'svc_test_xx')`,
        [alice.organizationId, `bulk ${i}`],
      );
    }
    const last = await post(alice, '/dashboard/keys', { name: 'the last one' });
    assert.equal(last.statusCode, 201, last.body);
    const over = await post(alice, '/dashboard/keys', { name: 'one too many' });
    assert.equal(over.statusCode, 403);
    assert.match(over.body, new RegExp(`at most ${cap} API keys that are not revoked; revoke one first`));
    assert.equal(await count(), cap, 'nothing was written');
  });
});
