// OAuth for an MCP source in a real browser (Debian's Chromium through playwright-core): the
// source page's Connect goes to the provider (the SDK's auth server on 127.0.0.1, which approves
// at once) and back through the callback; a run calls the signed-in tool; an access token the
// provider stops taking is refreshed by the next run; a revoked refresh token fails the run
// naming the source, the page shows "expired" with Reconnect, the destinations are told once,
// and one click of Reconnect brings the source back.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, signedInPage } from './helpers/browser.ts';
import { freePort } from './helpers/mcp-servers.ts';
import {
  type ModelReply,
  type ModelRequest,
  type ModelServer,
  startModelServer,
} from './helpers/model-server.ts';
import { type OAuthMcpServer, startOAuthMcpServer } from './helpers/oauth-mcp-server.ts';
import { finishedRun, type Org, runNow } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

let browser: Browser;
let svc: TestService;
let model: ModelServer;
let provider: OAuthMcpServer;
let hook: WebhookReceiver;
let base: string;

function callWhoami(request: ModelRequest): ModelReply {
  const result = request.body.messages.find((m) => m.role === 'tool');
  if (result) return { content: `The tool said: ${result.content}` };
  const name = request.body.tools?.map((t) => t.function.name).find((n) => n.endsWith('__whoami'));
  return name ? { toolCalls: [{ name, arguments: {} }] } : { content: 'no tool offered' };
}

// The hooks are the describe's: with the files of a batch sharing one process (scripts/test.ts),
// top-level hooks would run around the whole batch.
describe('an OAuth source signed in from the dashboard, in Chromium', () => {
  before(async () => {
    provider = await startOAuthMcpServer();
    hook = await startWebhookReceiver();
    model = await startModelServer(callWhoami);
    // The callback lives under the public URL, so the port is chosen before the service starts.
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    svc = await startTestService({
      listen: true,
      startLoops: true,
      env: {
        HOST: '127.0.0.1',
        PORT: String(port),
        SVC_PUBLIC_URL: base,
        SVC_MODEL_BASE_URL: model.url,
        SVC_MODEL_API_KEY: 'sk-test',
        SVC_ALLOW_PRIVATE_URLS: 'true',
        SVC_RUN_LEASE_SECONDS: '1',
      },
    });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
    await model?.close();
    await provider?.close();
    await hook?.close();
  });

  test('a source is connected from its page, runs refresh its token, a revoked sign-in shows expired and one click reconnects it', async () => {
    const name = `OAuth e2e ${Date.now()}`;
    const page: Page = await signedInPage(browser, svc, base, name);
    const violations: string[] = [];
    page.on('console', (msg) => {
      if (/content security policy/i.test(msg.text())) violations.push(`${page.url()}: ${msg.text()}`);
    });
    const [row] = await svc.testDb.db.query<{ id: string }>('SELECT id FROM organizations WHERE name = $1', [
      name,
    ]);
    assert.ok(row);
    const made = await svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${row.id}/keys`,
      admin: true,
      body: { name: 'e2e' },
    });
    assert.equal(made.status, 201, made.raw);
    const org: Org = { organizationId: row.id, apiKey: made.body.apiKey };
    const call = (method: 'GET' | 'POST', url: string, body?: unknown) =>
      svc.call({
        method,
        url,
        key: org.apiKey,
        ...(body !== undefined && { body: { organizationId: org.organizationId, ...body } }),
      });

    const source = (
      await call('POST', '/api/svc/sources', {
        type: 'mcp',
        name: 'Calendar',
        config: { transport: 'http', url: provider.mcpUrl },
        authType: 'oauth',
      })
    ).body;
    const task = (
      await call('POST', '/api/svc/tasks', {
        name: 'Agenda',
        prompt: 'Who am I signed in as?',
        schedule: 'daily',
        sourceIds: [source.id],
        destinations: [{ type: 'webhook', value: hook.url }],
      })
    ).body;
    const run = async () => finishedRun(svc, org, await runNow(svc, org, task.id), 30_000);
    const state = () => page.locator('#oauth-state').textContent();

    try {
      // Never connected: Connect takes the browser to the provider and back to the source page.
      await page.goto(`${base}/dashboard/sources/${source.id}`);
      assert.equal(await state(), 'never connected');
      await page.getByRole('button', { name: 'Connect', exact: true }).click();
      await page.waitForURL(`${base}/dashboard/sources/${source.id}?done=signed-in`);
      assert.equal(await state(), 'connected');
      await page.getByText('Source connected').waitFor();
      assert.equal(provider.counts.authorizations, 1);

      const first = await run();
      assert.equal(first.status, 'completed', first.error);
      assert.match(first.output, /The tool said: signed in as client/);

      // The provider stops taking the access token: the next run refreshes it.
      provider.expireAccessTokens();
      const refreshed = await run();
      assert.equal(refreshed.status, 'completed', refreshed.error);
      assert.equal(provider.counts.refreshes, 1);

      // The refresh token is revoked: the run fails naming the source and saying to reconnect.
      provider.expireAccessTokens();
      provider.revokeRefreshTokens();
      const failed = await run();
      assert.equal(failed.status, 'failed');
      assert.match(failed.error, /source "Calendar".*reconnect/s);
      const again = await run();
      assert.equal(again.status, 'failed');
      assert.equal(provider.counts.refusedRefreshes, 1, 'the expired sign-in is not tried again');
      await waitFor('the source.disconnected notice', async () =>
        hook.requests.some((r) => JSON.parse(r.body).type === 'source.disconnected') ? true : undefined,
      );
      assert.equal(hook.requests.filter((r) => JSON.parse(r.body).type === 'source.disconnected').length, 1);

      await page.goto(`${base}/dashboard/sources/${source.id}`);
      assert.equal(await state(), 'expired');
      assert.match((await page.locator('#oauth-failure').textContent()) ?? '', /refresh/);
      assert.match((await page.locator('h1').textContent())?.trim() ?? '', / inactive$/);

      // One click: signed in again, and runs work.
      await page.getByRole('button', { name: 'Reconnect', exact: true }).click();
      await page.waitForURL(`${base}/dashboard/sources/${source.id}?done=signed-in`);
      assert.equal(await state(), 'connected');
      assert.match((await page.locator('h1').textContent())?.trim() ?? '', / active$/);
      const back = await run();
      assert.equal(back.status, 'completed', back.error);

      // The pages showed no secret of the sign-in.
      const html = await page.content();
      for (const secret of provider.secrets()) assert.ok(!html.includes(secret));
      assert.deepEqual(violations, []);
    } finally {
      await page.context().close();
    }
  });
});
