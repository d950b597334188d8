// The dashboard is as strict as the API. Every page (each GET route registered for the
// dashboard, signed in) carries a Content-Security-Policy without remote images or unhashed
// inline script, X-Content-Type-Options: nosniff and a Referrer-Policy; so do the API's JSON
// answers. A skill whose Markdown points at a remote image shows no remote image. In Chromium the
// main pages load with no CSP violation and still work (styles applied, the schedule preview's
// script runs). Every form (each POST route) answers NUL characters, invalid percent-encoded or
// raw UTF-8, a 2 MiB field, 100,000 fields and a body that is not a form with a 400 that shows
// the form again (HTML, not JSON): never a 500, never an error line in the log.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { Browser, BrowserContext } from 'playwright-core';
import { signUp } from '../../src/domain/users.ts';
import { launchBrowser } from '../helpers/browser.ts';
import { startTestService, type TestService } from '../helpers/service.ts';

const EVIL_IMAGE = 'https://evil.example/p.png';
/** A double-submit token for the anonymous forms (sign-in, sign-up, invitation): 43 characters. */
const FORM_TOKEN = 'f'.repeat(43);
/** The routes of the JSON API and of operations; every other route belongs to the dashboard. */
const NOT_DASHBOARD = /^\/(api|healthz|readyz|livez|metrics)(\/|$)/;

describe('the dashboard is as strict as the API', () => {
  let svc: TestService;
  let base: string;
  let browser: Browser | undefined;
  let token: string;
  let csrf: string;
  const ids: Record<string, string> = {};
  let inviteToken: string;

  const cookie = () => `svc_session=${token}`;
  const get = (url: string, signedIn = true) =>
    svc.app.inject({ method: 'GET', url, headers: signedIn ? { cookie: cookie() } : {} });
  const postForm = (url: string, form: Record<string, string>) =>
    svc.app.inject({
      method: 'POST',
      url,
      headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf: csrf, ...form }).toString(),
    });
  const idIn = (location: unknown) => String(/([0-9a-f-]{36})/.exec(String(location))?.[1]);

  before(async () => {
    svc = await startTestService({ listen: true, env: { HOST: '127.0.0.1' } });
    base = String(svc.service.url);
    const made = await signUp(svc.service.deps, {
      email: 'strict@example.com',
      password: 'correct horse battery',
      organizationName: 'Strict organization',
    });
    token = made.session.token;
    csrf = made.session.csrfToken;
    // Room for one invitation (the free plan allows one person).
    const limit = await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${made.organizationId}`,
      admin: true,
      body: { usersLimit: 2 },
    });
    assert.equal(limit.status, 200, limit.raw);

    const skill = await postForm('/dashboard/skills', {
      name: 'Remote picture',
      content: `# Look\n\n![x](${EVIL_IMAGE})\n\nSome **text**.`,
    });
    assert.equal(skill.statusCode, 303, skill.body.slice(0, 500));
    ids.skills = idIn(skill.headers.location);
    const source = await postForm('/dashboard/sources', { name: 'Clock', type: 'local' });
    assert.equal(source.statusCode, 303, source.body.slice(0, 500));
    ids.sources = idIn(source.headers.location);
    const task = await postForm('/dashboard/tasks', {
      name: 'Daily',
      prompt: 'Summarise.',
      mode: 'daily',
      scheduleTime: '09:00',
      timezone: 'UTC',
      destRows: '0',
    });
    assert.equal(task.statusCode, 303, task.body.slice(0, 500));
    ids.tasks = idIn(task.headers.location);
    const run = await postForm(`/dashboard/tasks/${ids.tasks}/run`, {});
    assert.equal(run.statusCode, 303, run.body.slice(0, 500));
    ids.runs = idIn(run.headers.location);
    const key = await postForm('/dashboard/keys', { name: 'strict key' });
    assert.equal(key.statusCode, 201);
    const keys = await svc.call({ method: 'GET', url: '/dashboard/keys', headers: { cookie: cookie() } });
    ids.keys = String(/\/dashboard\/keys\/([0-9a-f-]{36})\/revoke/.exec(keys.raw)?.[1]);
    const invite = await postForm('/dashboard/members', { email: 'invitee@example.com' });
    assert.equal(invite.statusCode, 201);
    inviteToken = String(/\/invite\/([A-Za-z0-9_-]+)/.exec(invite.body)?.[1]);
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
  });

  /** Each dashboard route of a method, its parameters filled with things that exist. */
  function dashboardPaths(method: 'GET' | 'POST'): string[] {
    const urls = svc.app.registeredRoutes
      .filter((r) => r.method === method && !NOT_DASHBOARD.test(r.url))
      .map((r) => r.url);
    assert.ok(urls.length > (method === 'GET' ? 15 : 15), `${method} routes found: ${urls.join(', ')}`);
    return [...new Set(urls)].map((url) =>
      url.replace(':token', inviteToken).replace(/^\/dashboard\/(\w+)\/:id/, (_, section: string) => {
        const id = ids[section];
        assert.ok(id, `an id for ${url}`);
        return `/dashboard/${section}/${id}`;
      }),
    );
  }

  function assertStrictHeaders(where: string, res: LightMyRequestResponse) {
    assert.equal(res.headers['x-content-type-options'], 'nosniff', where);
    assert.ok(res.headers['referrer-policy'], `${where}: a Referrer-Policy`);
    const csp = String(res.headers['content-security-policy'] ?? '');
    assert.match(csp, /default-src 'none'/, `${where}: CSP ${csp}`);
    assert.match(csp, /frame-ancestors 'none'/, `${where}: CSP ${csp}`);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*|https?:|data:/, `${where}: CSP ${csp}`);
    const img = /img-src ([^;]*)/.exec(csp)?.[1];
    if (img !== undefined) assert.equal(img.trim(), "'self'", `${where}: img-src`);
  }

  test('every dashboard page carries a CSP without remote images or inline script, nosniff and a Referrer-Policy', async () => {
    for (const path of dashboardPaths('GET')) {
      const res = await get(path);
      // The OAuth callback opened without a sign-in's state is a bad request, shown as a page.
      if (path === '/oauth/callback') assert.equal(res.statusCode, 400);
      else assert.ok(res.statusCode < 400, `${path}: ${res.statusCode}`);
      assertStrictHeaders(`GET ${path}`, res);
      const anonymous = await get(path, false);
      assertStrictHeaders(`GET ${path} (signed out)`, anonymous);
    }
  });

  test('API answers and the API reference page carry nosniff, a Referrer-Policy and a CSP', async () => {
    for (const url of ['/api/svc/tasks', '/api/svc/openapi.json', '/api/svc/no-such-route', '/healthz']) {
      const res = await svc.app.inject({ method: 'GET', url });
      assert.equal(res.headers['x-content-type-options'], 'nosniff', url);
      assert.ok(res.headers['referrer-policy'], `${url}: a Referrer-Policy`);
      assert.match(String(res.headers['content-security-policy']), /default-src 'none'/, url);
    }
    for (const url of ['/api/svc/docs/', '/api/svc/docs/static/swagger-ui-bundle.js']) {
      const docs = await svc.app.inject({ method: 'GET', url });
      assert.equal(docs.statusCode, 200, url);
      assert.equal(docs.headers['x-content-type-options'], 'nosniff', url);
      assert.ok(docs.headers['referrer-policy'], url);
      const csp = String(docs.headers['content-security-policy']);
      assert.match(csp, /script-src 'self'/, url);
      assert.match(csp, /frame-ancestors 'none'/, url);
      assert.doesNotMatch(csp, /validator\.swagger\.io/, url);
    }
  });

  test('a skill whose Markdown points at a remote image shows no remote image', async () => {
    const res = await get(`/dashboard/skills/${ids.skills}`);
    assert.equal(res.statusCode, 200);
    assert.match(res.body, /<strong>text<\/strong>/);
    assert.doesNotMatch(res.body, /<img\b/i, 'no image element');
    assertStrictHeaders('the skill page', res);
  });

  test('in Chromium the main pages load with no CSP violation, fetch nothing remote, and still work', async () => {
    browser = await launchBrowser();
    const context: BrowserContext = await browser.newContext();
    const violations: string[] = [];
    const foreign: string[] = [];
    await context.route(
      (url) => url.origin !== base,
      (route) => {
        foreign.push(route.request().url());
        return route.abort();
      },
    );
    const page = await context.newPage();
    page.on('console', (msg) => {
      // swagger-ui's bundle sets an inline style its own (stricter) policy refuses, harmlessly:
      // that page is checked by what it renders.
      if (page.url().includes('/api/svc/docs')) return;
      if (/content security policy/i.test(msg.text())) violations.push(`${page.url()}: ${msg.text()}`);
    });

    for (const path of ['/login', '/signup']) await page.goto(`${base}${path}`);
    await context.addCookies([{ name: 'svc_session', value: token, url: base }]);
    for (const path of [
      '/dashboard',
      '/dashboard/tasks',
      `/dashboard/tasks/${ids.tasks}`,
      `/dashboard/tasks/${ids.tasks}/edit`,
      '/dashboard/runs',
      `/dashboard/runs/${ids.runs}`,
      '/dashboard/skills',
      `/dashboard/skills/${ids.skills}`,
      '/dashboard/skills/new',
      '/dashboard/sources',
      `/dashboard/sources/${ids.sources}`,
      '/dashboard/sources/new',
      '/dashboard/keys',
      '/dashboard/members',
      '/dashboard/billing',
    ]) {
      const res = await page.goto(`${base}${path}`);
      assert.equal(res?.status(), 200, path);
      // The inline stylesheet applies: the skip link is off-screen until focused.
      assert.equal(
        await page.evaluate("getComputedStyle(document.querySelector('a.skip')).left"),
        '-9999px',
        path,
      );
    }

    // The API reference page (swagger-ui, under its own policy) renders its operations.
    await page.goto(`${base}/api/svc/docs/`);
    await page.locator('.opblock').first().waitFor({ timeout: 15_000 });

    // The schedule preview's script runs and may fetch its fragment from this origin.
    await page.goto(`${base}/dashboard/tasks/new`);
    await page.getByRole('radio', { name: 'Cron expression' }).check();
    await page.locator('#cronExpression').fill('17 6 * * *');
    await page.locator('#schedule-preview').getByText(/06:17/).first().waitFor({ timeout: 10_000 });

    // The new key's page with its copy button script.
    await page.goto(`${base}/dashboard/keys`);
    await page.getByLabel('Name').fill('browser key');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.locator('#key-value').waitFor();

    await context.close();
    assert.deepEqual(violations, [], 'CSP violations');
    assert.deepEqual(foreign, [], 'requests to other origins');
  });

  /** A form body that is wrong in each way a form can be. */
  const BAD_BODIES: { name: string; type: string; body: (csrfToken: string) => string | Buffer }[] = [
    { name: 'a NUL character', type: 'form', body: (c) => `_csrf=${c}&name=a%00b&email=x%00%40example.com` },
    { name: 'invalid percent-encoded UTF-8', type: 'form', body: (c) => `_csrf=${c}&name=%FF%FE&email=%C3` },
    { name: 'an encoded lone surrogate', type: 'form', body: (c) => `_csrf=${c}&name=%ED%A0%80` },
    {
      name: 'raw bytes that are not UTF-8',
      type: 'form',
      body: (c) => Buffer.concat([Buffer.from(`_csrf=${c}&name=`), Buffer.from([0xff, 0xfe, 0x80])]),
    },
    { name: 'a 2 MiB field', type: 'form', body: (c) => `_csrf=${c}&name=${'a'.repeat(2 * 1024 * 1024)}` },
    { name: '100,000 fields', type: 'form', body: (c) => `_csrf=${c}${'&f=1'.repeat(100_000)}` },
    { name: 'a JSON body', type: 'application/json', body: (c) => JSON.stringify({ _csrf: c, name: 42 }) },
    { name: 'a text body', type: 'text/plain', body: (c) => `_csrf=${c}&name=x` },
  ];

  /**
   * Forms on a page only in some states (a Stripe customer to manage, a failed delivery to retry,
   * a connector source to connect): here the page they would be on is shown again, told by its
   * title (a source's page by its connection test's form).
   */
  const SOMETIMES: [RegExp, RegExp][] = [
    [/^\/dashboard\/billing\/portal$/, /<title>Billing /],
    [/^\/dashboard\/runs\/[^/]+\/redeliver$/, /<title>Run /],
    [/^\/dashboard\/sources\/[^/]+\/connect$/, /action="\/dashboard\/sources\/[^"/]+\/test"/],
  ];

  test('every form answers bad input with a 400 and the form shown again, never a 500 or an error log line', async () => {
    const anonymous = /^\/(login|signup|invite\/)/;
    const paths = dashboardPaths('POST');
    const failures: string[] = [];
    const formShown = (path: string, body: string) => {
      const page = SOMETIMES.find(([route]) => route.test(path))?.[1];
      return page ? page.test(body) && body.includes('<form') : body.includes(`action="${path}"`);
    };
    for (const path of paths) {
      const signedOut = anonymous.test(path);
      for (const bad of BAD_BODIES) {
        const res = await svc.app.inject({
          method: 'POST',
          url: path,
          headers: {
            cookie: signedOut ? `svc_form=${FORM_TOKEN}` : cookie(),
            'content-type': bad.type === 'form' ? 'application/x-www-form-urlencoded' : bad.type,
          },
          payload: bad.body(signedOut ? FORM_TOKEN : csrf),
        });
        const what = `POST ${path} with ${bad.name}`;
        const type = String(res.headers['content-type']);
        if (res.statusCode !== 400) failures.push(`${what}: ${res.statusCode} ${res.body.slice(0, 200)}`);
        else if (!type.startsWith('text/html')) failures.push(`${what}: ${type}`);
        else if (!formShown(path, res.body)) failures.push(`${what}: the form is not shown`);
        else if (!/class="flash error"/.test(res.body)) failures.push(`${what}: no message`);
        else {
          try {
            assertStrictHeaders(what, res);
          } catch (err) {
            failures.push((err as Error).message);
          }
        }
      }
    }
    assert.deepEqual(failures, []);

    // Signed out, a refused form on a signed-in page is sent to sign in, like its page.
    const stranger = await svc.app.inject({
      method: 'POST',
      url: '/dashboard/skills',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'name=a%00b&content=x',
    });
    assert.equal(stranger.statusCode, 303);
    assert.equal(stranger.headers.location, `/login?next=${encodeURIComponent('/dashboard/skills/new')}`);

    // Nothing was done: still signed in, the skill and the key are still there.
    const skill = await get(`/dashboard/skills/${ids.skills}`);
    assert.equal(skill.statusCode, 200);
    for (const section of ['skills', 'sources', 'tasks']) {
      const list = await get(`/dashboard/${section}`);
      const listed = new Set(list.body.match(new RegExp(`/dashboard/${section}/[0-9a-f-]{36}`, 'g')));
      assert.deepEqual(
        [...listed],
        [`/dashboard/${section}/${ids[section]}`],
        `no ${section} made or deleted`,
      );
    }
    const keys = await get('/dashboard/keys');
    assert.doesNotMatch(keys.body, /badge failed">revoked/);
    const errorLines = svc.logs.filter((line) => /"level":(50|60)/.test(line) || /"stack"/.test(line));
    assert.deepEqual(errorLines, [], 'no error-level log line, no stack');
  });
});
