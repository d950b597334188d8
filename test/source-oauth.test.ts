// OAuth for sources through the API and the worker: an authorization server and an MCP server
// that requires its tokens (the SDK's server-side auth, test/helpers/oauth-mcp-server.ts).
// Connect (discovery, dynamic registration, PKCE, the callback), a run that calls the tool,
// a refresh after the access token stops working, and a revoked refresh token: the run fails
// naming the source and saying to reconnect, the source turns inactive, the destinations are
// told once, and later runs fail the same way without asking the provider again.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ModelReply, ModelRequest, ModelServer } from './helpers/model-server.ts';
import { type OAuthMcpServer, startOAuthMcpServer } from './helpers/oauth-mcp-server.ts';
import {
  create,
  finishedRun,
  newTask,
  type Org,
  runNow,
  startWorkerService,
  unlimited,
} from './helpers/runs.ts';
import type { TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

const PUBLIC_URL = 'http://tasks.example';

/** A task prompt that has the model call `whoami` twice, one step after the other. */
const TWICE = 'Call whoami twice';

/** Calls the `whoami` tool once (twice for TWICE), then answers with what it said. */
function callWhoami(prompt: string, request: ModelRequest): ModelReply {
  const results = request.body.messages.filter((m) => m.role === 'tool');
  if (results.length >= (prompt.includes(TWICE) ? 2 : 1))
    return { content: `The tool said: ${results.map((r) => r.content).join(' / ')}` };
  const names = request.body.tools?.map((t) => t.function.name) ?? [];
  const name = names.find((n) => n.endsWith('__whoami'));
  if (name) return { toolCalls: [{ name, arguments: {} }] };
  // An api source (no OpenAPI document) offers http_request: GET /whoami under its base URL.
  const http = names.find((n) => n.endsWith('__http_request'));
  return http
    ? { toolCalls: [{ name: http, arguments: { path: 'whoami' } }] }
    : { content: 'no tool offered' };
}

/** A hook that runs once. */
const once = (f: () => void) => {
  let done = false;
  return () => {
    if (!done) f();
    done = true;
  };
};

describe('OAuth sources', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;
  let as: OAuthMcpServer;
  let hook: WebhookReceiver;

  before(async () => {
    as = await startOAuthMcpServer();
    hook = await startWebhookReceiver();
    ({ svc, model } = await startWorkerService((prompt, _i, request) => callWhoami(prompt, request), {
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_PUBLIC_URL: PUBLIC_URL,
      SVC_OAUTH_CLIENTS: `operator=operator-client:operator-secret-0123456789`,
      SVC_WORKER_CONCURRENCY: '4',
      SVC_ORG_CONCURRENCY: '4',
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc.close();
    await model.close();
    await as.close();
    await hook.close();
  });

  const getSource = async (id: string) =>
    (await svc.call({ method: 'GET', url: `/api/svc/sources/${id}`, key: org.apiKey })).body;
  const connect = (id: string) =>
    svc.call({ method: 'POST', url: `/api/svc/sources/${id}/connect`, key: org.apiKey });

  /** What a browser does with the URL: the provider approves and redirects to our callback, which is followed. */
  async function signIn(url: string) {
    const approved = await fetch(url, { redirect: 'manual' });
    assert.equal(approved.status, 302, await approved.text());
    const callback = new URL(approved.headers.get('location') ?? '');
    assert.equal(`${callback.origin}${callback.pathname}`, `${PUBLIC_URL}/oauth/callback`);
    return svc.app.inject({ method: 'GET', url: `${callback.pathname}${callback.search}` });
  }

  /** An api source that signs in with the endpoints its authConfig names and the operator's client. */
  const newApiSource = (name: string) =>
    create(svc, org, 'sources', {
      type: 'api',
      name,
      config: { baseUrl: `${as.issuer}/api` },
      authType: 'oauth',
      authConfig: {
        provider: 'operator',
        authorizationUrl: `${as.issuer}/authorize`,
        tokenUrl: `${as.issuer}/token`,
        scope: 'tools',
      },
    });

  async function connectedSource(name: string) {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name,
      config: { transport: 'http', url: as.mcpUrl },
      authType: 'oauth',
    });
    const started = await connect(source.id);
    assert.equal(started.status, 200, started.raw);
    const done = await signIn(started.body.url);
    assert.equal(done.statusCode, 303, done.body);
    assert.equal(done.headers.location, `/dashboard/sources/${source.id}?done=signed-in`);
    return source as { id: string };
  }

  const run = async (taskId: string) => finishedRun(svc, org, await runNow(svc, org, taskId), 30_000);
  const notices = async (taskId: string) =>
    svc.testDb.db.query<{ kind: string }>(
      "SELECT kind FROM deliveries WHERE task_id = $1 AND kind = 'source.disconnected'",
      [taskId],
    );

  test('connect answers a provider URL with PKCE and state; the callback stores the sign-in and the source turns active', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Tracker',
      config: { transport: 'http', url: as.mcpUrl },
      authType: 'oauth',
    });
    assert.equal((await getSource(source.id)).isActive, false);
    const started = await connect(source.id);
    assert.equal(started.status, 200, started.raw);
    assert.deepEqual(Object.keys(started.body), ['url']);
    const url = new URL(started.body.url);
    assert.equal(url.origin, as.issuer);
    assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(url.searchParams.get('redirect_uri'), `${PUBLIC_URL}/oauth/callback`);
    assert.equal(url.searchParams.get('resource'), as.mcpUrl);
    assert.ok((url.searchParams.get('state') ?? '').length >= 40);

    const done = await signIn(started.body.url);
    assert.equal(done.statusCode, 303, done.body);
    const after = await getSource(source.id);
    assert.equal(after.isActive, true);
    assert.ok(after.lastConnectedAt, 'lastConnectedAt is set');
    assert.equal(after.authConfig, undefined);

    // Sealed at rest: no token, client secret or code in any column.
    const [row] = await svc.testDb.db.query<Record<string, unknown>>(
      'SELECT row_to_json(o)::text AS stored FROM source_oauth o WHERE source_id = $1',
      [source.id],
    );
    for (const s of as.secrets()) assert.ok(!String(row?.stored).includes(s), 'no secret stored in clear');
  });

  test('the state works once: the same callback again is refused with a clear page', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Once',
      config: { transport: 'http', url: as.mcpUrl },
      authType: 'oauth',
    });
    const started = await connect(source.id);
    const approved = await fetch(started.body.url, { redirect: 'manual' });
    const callback = new URL(approved.headers.get('location') ?? '');
    const path = `${callback.pathname}${callback.search}`;
    assert.equal((await svc.app.inject({ method: 'GET', url: path })).statusCode, 303);
    const again = await svc.app.inject({ method: 'GET', url: path });
    assert.equal(again.statusCode, 400);
    assert.match(again.body, /not known \(already used/);
    const forged = await svc.app.inject({ method: 'GET', url: '/oauth/callback?state=forged&code=x' });
    assert.equal(forged.statusCode, 400);
  });

  test('connect refuses a source that does not sign in with OAuth, and one of another organization is not found', async () => {
    const plain = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Plain',
      config: { transport: 'http', url: as.mcpUrl },
      authType: 'bearer',
      authConfig: { token: 'x' },
    });
    const refused = await connect(plain.id);
    assert.equal(refused.status, 409, refused.raw);
    assert.equal(refused.body.error.code, 'conflict');
    assert.match(refused.body.error.message, /authType bearer, which has no sign-in to start/);
    const other = await svc.createOrg('paid');
    const elsewhere = await svc.call({
      method: 'POST',
      url: `/api/svc/sources/${plain.id}/connect`,
      key: other.apiKey,
    });
    assert.equal(elsewhere.status, 404);
  });

  test('a run calls the tool with the token; an expired token is refreshed; a revoked refresh token fails the run, deactivates the source and tells the destinations once', async () => {
    const source = await connectedSource('Mail');
    const task = await newTask(svc, org, {
      sourceIds: [source.id],
      destinations: [{ type: 'webhook', value: hook.url }],
      autoPauseAfterFailures: 0,
    });

    const first = await run(task.id);
    assert.equal(first.status, 'completed', first.error);
    assert.match(first.output, /The tool said: signed in as client/);
    const tokensAccepted = as.accepted.length;

    // The provider stops taking the access token: the 401 gets one refresh and one more try.
    as.expireAccessTokens();
    const refreshesBefore = as.counts.refreshes;
    const second = await run(task.id);
    assert.equal(second.status, 'completed', second.error);
    assert.equal(as.counts.refreshes, refreshesBefore + 1);
    assert.notEqual(as.accepted.at(-1), as.accepted[tokensAccepted - 1], 'a new token was used');

    // Short-lived tokens are refreshed before they run out, without a 401 first.
    as.accessTtlSeconds = 30;
    as.expireAccessTokens();
    await run(task.id);
    const beforeEarly = as.counts.refreshes;
    const early = await run(task.id);
    assert.equal(early.status, 'completed', early.error);
    assert.equal(as.counts.refreshes, beforeEarly + 1, 'a token 30 s from its end was refreshed first');
    as.accessTtlSeconds = 3600;

    as.expireAccessTokens();
    as.revokeRefreshTokens();
    const failed = await run(task.id);
    assert.equal(failed.status, 'failed');
    assert.match(failed.error, /source "Mail"/);
    assert.match(failed.error, /reconnect/);
    const inactive = await getSource(source.id);
    assert.equal(inactive.isActive, false);

    const refused = as.counts.refusedRefreshes;
    const again = await run(task.id);
    assert.equal(again.status, 'failed');
    assert.match(again.error, /source "Mail".*reconnect/);
    assert.equal(as.counts.refusedRefreshes, refused, 'an expired sign-in is not tried again');
    assert.equal((await notices(task.id)).length, 1, 'one notice per destination, once');
    const told = await waitFor('the source.disconnected webhook', async () =>
      hook.requests.map((r) => JSON.parse(r.body)).find((e) => e.type === 'source.disconnected'),
    );
    assert.equal(told.data.sourceName, 'Mail');
    assert.match(told.data.reason, /refresh/);

    // Nothing secret reached the model, the deliveries, the logs or the API's answers.
    const seen = [
      JSON.stringify(model.requests),
      hook.requests.map((r) => r.body).join('\n'),
      svc.logs.join('\n'),
      JSON.stringify(await getSource(source.id)),
      JSON.stringify([first, second, failed, again]),
    ].join('\n');
    for (const s of as.secrets()) assert.ok(!seen.includes(s), 'no token, code or client secret leaked');

    // Reconnecting brings it back.
    const started = await connect(source.id);
    assert.equal((await signIn(started.body.url)).statusCode, 303);
    assert.equal((await getSource(source.id)).isActive, true);
    const back = await run(task.id);
    assert.equal(back.status, 'completed', back.error);
  });

  test('an access token that stops working between two tool calls of a run is refreshed and the second call is tried again with the new one', async () => {
    const source = await connectedSource('Calendar');
    const task = await newTask(svc, org, { sourceIds: [source.id], prompt: `${TWICE} (calendar)` });
    const refreshes = as.counts.refreshes;
    const accepted = as.accepted.length;
    // The first call answers, then the provider stops taking every access token it issued.
    as.onToolCall = once(() => as.expireAccessTokens());
    const done = await run(task.id).finally(() => {
      as.onToolCall = undefined;
    });
    assert.equal(done.status, 'completed', done.error);
    assert.match(done.output, /The tool said: signed in as client \S+ \/ signed in as client \S+/);
    assert.equal(as.counts.refreshes, refreshes + 1, 'one refresh, during the run');
    const used = as.accepted.slice(accepted);
    assert.notEqual(used.at(-1), used[0], 'the second call carried the new token');
    assert.equal((await getSource(source.id)).isActive, true);
  });

  test('a refresh token revoked between two tool calls of a run fails the run naming the source, deactivates it and tells the destinations once', async () => {
    const source = await connectedSource('Drive');
    const task = await newTask(svc, org, {
      sourceIds: [source.id],
      prompt: `${TWICE} (drive)`,
      destinations: [{ type: 'webhook', value: hook.url }],
      autoPauseAfterFailures: 0,
    });
    const refused = as.counts.refusedRefreshes;
    as.onToolCall = once(() => {
      as.expireAccessTokens();
      as.revokeRefreshTokens();
    });
    const failed = await run(task.id).finally(() => {
      as.onToolCall = undefined;
    });
    assert.equal(failed.status, 'failed');
    assert.match(failed.error, /source "Drive": the OAuth sign-in has run out .*reconnect it/);
    assert.equal(as.counts.refusedRefreshes, refused + 1, 'the provider was asked once');
    assert.equal((await getSource(source.id)).isActive, false);
    const asked = model.requests.filter((r) =>
      r.body.messages.some((m) => m.role === 'user' && String(m.content).includes(task.prompt)),
    );
    assert.equal(asked.length, 2, 'the model is not asked again after the sign-in ran out');

    const again = await run(task.id);
    assert.equal(again.status, 'failed');
    assert.match(again.error, /source "Drive".*reconnect/);
    assert.equal(as.counts.refusedRefreshes, refused + 1, 'an expired sign-in is not tried again');
    assert.equal((await notices(task.id)).length, 1, 'one notice per destination, once');
    const told = await waitFor('the source.disconnected webhook of Drive', async () =>
      hook.requests
        .map((r) => JSON.parse(r.body))
        .find((e) => e.type === 'source.disconnected' && e.data.sourceName === 'Drive'),
    );
    assert.match(told.data.reason, /refresh/);
  });

  test("an api source's tool request that finds its access token refused mid-run is refreshed and sent once more", async () => {
    as.addClient({
      clientId: 'operator-client',
      clientSecret: 'operator-secret-0123456789',
      redirectUri: `${PUBLIC_URL}/oauth/callback`,
    });
    const source = await newApiSource('Ledger');
    const started = await connect(source.id);
    assert.equal(started.status, 200, started.raw);
    assert.equal((await signIn(started.body.url)).statusCode, 303);
    const task = await newTask(svc, org, { sourceIds: [source.id], prompt: `${TWICE} (ledger)` });
    const refreshes = as.counts.refreshes;
    const accepted = as.accepted.length;
    as.onToolCall = once(() => as.expireAccessTokens());
    const done = await run(task.id).finally(() => {
      as.onToolCall = undefined;
    });
    assert.equal(done.status, 'completed', done.error);
    assert.equal((done.output.match(/HTTP 200/g) ?? []).length, 2, done.output);
    assert.equal(as.counts.refreshes, refreshes + 1);
    const used = as.accepted.slice(accepted);
    assert.equal(used.length, 2, 'each request was accepted once');
    assert.notEqual(used[1], used[0], 'the second request carried the new token');
  });

  test('runs that find the token refused at once share one refresh: a rotated refresh token is never used twice', async () => {
    const source = await connectedSource('Shared');
    const tasks = await Promise.all(
      [1, 2, 3].map((n) => newTask(svc, org, { name: `Shared ${n}`, sourceIds: [source.id] })),
    );
    as.expireAccessTokens();
    const refreshes = as.counts.refreshes;
    const refused = as.counts.refusedRefreshes;
    const ids = await Promise.all(tasks.map((t) => runNow(svc, org, t.id)));
    const runs = await Promise.all(ids.map((id) => finishedRun(svc, org, id, 30_000)));
    for (const r of runs) assert.equal(r.status, 'completed', r.error);
    assert.equal(as.counts.refusedRefreshes, refused, 'no refresh token was used twice');
    assert.equal(as.counts.refreshes, refreshes + 1, 'one refresh for all of them');
    assert.equal((await getSource(source.id)).isActive, true);
  });

  test("an outage of the provider's token endpoint fails the run but keeps the sign-in; the next run refreshes", async () => {
    const source = await connectedSource('Flaky');
    const task = await newTask(svc, org, {
      sourceIds: [source.id],
      destinations: [{ type: 'webhook', value: hook.url }],
    });
    as.expireAccessTokens();
    as.tokenOutage = true;
    const failed = await run(task.id).finally(() => {
      as.tokenOutage = false;
    });
    assert.equal(failed.status, 'failed');
    assert.match(
      failed.error,
      /source "Flaky": the OAuth token could not be refreshed .*the next run tries again/,
    );
    assert.equal((await getSource(source.id)).isActive, true, 'an outage does not sign the source out');
    assert.equal((await notices(task.id)).length, 0);
    const next = await run(task.id);
    assert.equal(next.status, 'completed', next.error);
  });

  test('a never-connected source, or one whose URL changed since its sign-in, is not sent a token and asks to be (re)connected', async () => {
    const fresh = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Fresh',
      config: { transport: 'http', url: as.mcpUrl },
      authType: 'oauth',
    });
    const tested = await svc.call({
      method: 'POST',
      url: `/api/svc/sources/${fresh.id}/test`,
      key: org.apiKey,
    });
    assert.equal(tested.body.success, false);
    assert.match(tested.body.message, /"Fresh" has never been connected: connect it/);

    const moved = await connectedSource('Moved');
    const patched = await svc.call({
      method: 'PATCH',
      url: `/api/svc/sources/${moved.id}`,
      key: org.apiKey,
      body: { config: { transport: 'http', url: `${as.mcpUrl}?elsewhere=1` } },
    });
    assert.equal(patched.status, 200, patched.raw);
    const accepted = as.accepted.length;
    const task = await newTask(svc, org, { sourceIds: [moved.id] });
    const failed = await run(task.id);
    assert.equal(failed.status, 'failed');
    assert.match(failed.error, /source "Moved": its URL changed since it was connected; reconnect it/);
    assert.equal(as.accepted.length, accepted, 'no token was sent');
  });

  test('an operator-registered client (SVC_OAUTH_CLIENTS) signs in without dynamic registration', async () => {
    as.addClient({
      clientId: 'operator-client',
      clientSecret: 'operator-secret-0123456789',
      redirectUri: `${PUBLIC_URL}/oauth/callback`,
    });
    const registrations = as.counts.registrations;
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Docs',
      config: { transport: 'http', url: as.mcpUrl },
      authType: 'oauth',
      authConfig: { provider: 'operator' },
    });
    const started = await connect(source.id);
    assert.equal(started.status, 200, started.raw);
    assert.equal(new URL(started.body.url).searchParams.get('client_id'), 'operator-client');
    assert.equal((await signIn(started.body.url)).statusCode, 303);
    assert.equal(as.counts.registrations, registrations);
    assert.equal((await getSource(source.id)).isActive, true);
  });

  test('an api source signs in with the endpoints its authConfig names and the operator client', async () => {
    const source = await newApiSource('Api');
    const started = await connect(source.id);
    assert.equal(started.status, 200, started.raw);
    const url = new URL(started.body.url);
    assert.equal(url.searchParams.get('scope'), 'tools');
    assert.equal(url.searchParams.get('resource'), null);
    const done = await signIn(started.body.url);
    assert.equal(done.statusCode, 303, done.body);
    assert.equal((await getSource(source.id)).isActive, true);

    const unnamed = await create(svc, org, 'sources', {
      type: 'api',
      name: 'Api without endpoints',
      config: { baseUrl: `${as.issuer}/api` },
      authType: 'oauth',
    });
    const refused = await connect(unnamed.id);
    assert.equal(refused.status, 400);
    assert.match(refused.body.error.message, /authorizationUrl/);
  });
});
