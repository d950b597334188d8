// Connector sources (`authType: connector`) end to end: the service against a local stand-in
// that speaks Composio's v3 REST API (test/helpers/connector-server.ts), through the API, the
// public callback and the worker, with a scripted model that calls the provider's tool.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { ComposioProvider } from '../src/domain/connector/composio.ts';
import { connectorSubject } from '../src/domain/connector/provider.ts';
import { ConnectorError } from '../src/domain/connector/types.ts';
import { signIn as signInUser } from '../src/domain/users.ts';
import { outboundFetch } from '../src/lib/outbound.ts';
import { type ConnectorServer, type StandInTool, startConnectorServer } from './helpers/connector-server.ts';
import type { ModelReply, ModelRequest, ModelServer } from './helpers/model-server.ts';
import {
  create,
  finishedRun,
  newTask,
  type Org,
  runNow,
  startWorkerService,
  unlimited,
} from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';

const getRepo: StandInTool = {
  slug: 'GITHUB_GET_A_REPOSITORY',
  name: 'Get a repository',
  description: 'Gets a repository of GitHub',
  version: '20250909_00',
  input_parameters: {
    type: 'object',
    properties: { owner: { type: 'string' }, repo: { type: 'string' } },
    required: ['owner', 'repo'],
  },
  run: (args) => ({ full_name: `${args.owner}/${args.repo}`, stargazers_count: 42 }),
};

/** The prompt names the tool and its JSON arguments: `call <tool> <json>`. */
function callFromPrompt(prompt: string, request: ModelRequest): ModelReply {
  const [, tool, args] = /^call (\S+) (.*)$/s.exec(prompt) ?? [];
  if (!tool) return {};
  const toolResult = request.body.messages.find((m) => m.role === 'tool');
  if (toolResult) return { content: `The tool said: ${toolResult.content}` };
  const name = request.body.tools?.map((t) => t.function.name).find((n) => n.endsWith(`__${tool}`));
  if (!name) return { content: `no tool ${tool} offered` };
  return { toolCalls: [{ name, arguments: args }] };
}

describe('the Composio provider against its stand-in', () => {
  let server: ConnectorServer;
  let provider: ComposioProvider;
  const signal = new AbortController().signal;
  const subject = connectorSubject('org-1', 'source-1', 'GitHub');

  before(async () => {
    server = await startConnectorServer();
    server.tools.set('github', [getRepo]);
    server.tools.set('gmail', []);
    server.authConfigs.set('github', [
      { id: 'ac_disabled', status: 'DISABLED' },
      { id: 'ac_github', status: 'ENABLED' },
    ]);
    provider = new ComposioProvider({
      apiBase: server.url,
      apiKey: server.apiKey,
      fetch: outboundFetch({ allowPrivateUrls: true }),
    });
  });
  after(() => server.close());

  test('toolkits are read page by page, with the API key as x-api-key', async () => {
    server.pageSize = 1;
    try {
      const toolkits = await provider.listToolkits(signal);
      assert.deepEqual(
        toolkits.map((t) => t.slug),
        ['github', 'gmail'],
      );
      const calls = server.requests.filter((r) => r.path === '/api/v3/toolkits');
      assert.equal(calls.length, 2, 'two pages of one');
      assert.ok(calls.every((r) => r.apiKey === server.apiKey));
      assert.equal(calls[1]?.query.get('cursor') !== null, true);
    } finally {
      server.pageSize = 100;
    }
  });

  test("a connection starts with the toolkit's enabled auth config and answers the provider's link", async () => {
    const { url } = await provider.startConnection(subject, 'https://svc.example/callback?state=x', signal);
    assert.match(url, /\/link\/lk_/);
    const link = server.requests.findLast((r) => r.path === '/api/v3/connected_accounts/link');
    assert.deepEqual(link?.body, {
      auth_config_id: 'ac_github',
      user_id: 'svc:org-1:source-1',
      callback_url: 'https://svc.example/callback?state=x',
    });
    const account = await provider.account(subject, signal);
    assert.equal(account?.status, 'INITIATED');
    assert.equal(account?.connected, false);
    await server.signIn(url);
    const signedIn = await provider.account(subject, signal);
    assert.equal(signedIn?.connected, true);
    assert.equal(signedIn?.toolkit, 'github');
  });

  test('a toolkit without an auth config at the provider is a setup problem the message names', async () => {
    const gmail = connectorSubject('org-1', 'source-2', 'gmail');
    await assert.rejects(provider.startConnection(gmail, 'https://svc.example/cb', signal), (err) => {
      assert.ok(err instanceof ConnectorError);
      assert.equal(err.kind, 'not_configured');
      assert.match(err.message, /no enabled auth config for toolkit "gmail"/);
      return true;
    });
  });

  test("tools are the toolkit's, and a call sends the account, the arguments and the tool's version", async () => {
    const account = await provider.account(subject, signal);
    assert.ok(account?.connected);
    const set = await provider.openTools(subject, account, { maxTools: 256, signal });
    assert.deepEqual(
      set.tools.map((t) => t.name),
      ['GITHUB_GET_A_REPOSITORY'],
    );
    assert.deepEqual(set.tools[0]?.inputSchema, getRepo.input_parameters);
    const outcome = await set.call('GITHUB_GET_A_REPOSITORY', { owner: 'octo', repo: 'cat' }, signal);
    assert.deepEqual(outcome, { ok: true, text: '{"full_name":"octo/cat","stargazers_count":42}' });
    const execute = server.requests.findLast((r) => r.path.startsWith('/api/v3/tools/execute/'));
    assert.deepEqual(execute?.body, {
      connected_account_id: account.id,
      user_id: 'svc:org-1:source-1',
      arguments: { owner: 'octo', repo: 'cat' },
      version: '20250909_00',
    });
  });

  test('a refused key is named as the setup problem, without the key or what the provider echoed of it', async () => {
    const wrong = new ComposioProvider({
      apiBase: server.url,
      apiKey: 'ak_wrong-key-value',
      fetch: outboundFetch({ allowPrivateUrls: true }),
    });
    server.failNext('/api/v3/toolkits', 401, { error: { message: 'Invalid API key ak_wrong-key-value' } });
    await assert.rejects(wrong.listToolkits(signal), (err) => {
      assert.ok(err instanceof ConnectorError);
      assert.equal(err.kind, 'not_configured');
      assert.match(err.message, /refused the service's API key \(HTTP 401/);
      assert.ok(!err.message.includes('ak_wrong-key-value'), err.message);
      return true;
    });
  });

  test('an answer over 4 MiB fails and a redirect is not followed', async () => {
    server.failNext('/api/v3/toolkits', 200, { items: [], padding: 'x'.repeat(4 * 1024 * 1024) });
    await assert.rejects(provider.listToolkits(signal), /answered more than 4 MiB/);
    server.failNext('/api/v3/toolkits', 307, {});
    await assert.rejects(provider.listToolkits(signal), /answered a redirect/);
  });

  test('without SVC_ALLOW_PRIVATE_URLS a loopback provider base is refused by the private-address guard', async () => {
    const guarded = new ComposioProvider({
      apiBase: server.url,
      apiKey: server.apiKey,
      fetch: outboundFetch({ allowPrivateUrls: false }),
    });
    await assert.rejects(guarded.listToolkits(signal), (err) => {
      assert.ok(err instanceof ConnectorError);
      assert.equal(err.kind, 'refused');
      assert.match(err.message, /private or loopback address/);
      return true;
    });
  });
});

describe('connector sources through the API and the worker', () => {
  let svc: TestService;
  let model: ModelServer;
  let server: ConnectorServer;
  let org: Org;

  before(async () => {
    server = await startConnectorServer();
    server.tools.set('github', [getRepo]);
    server.authConfigs.set('github', [{ id: 'ac_github', status: 'ENABLED' }]);
    ({ svc, model } = await startWorkerService((prompt, _i, request) => callFromPrompt(prompt, request), {
      SVC_CONNECTOR_PROVIDER: 'composio',
      SVC_CONNECTOR_API_KEY: server.apiKey,
      SVC_CONNECTOR_API_BASE: server.url,
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_PUBLIC_URL: 'https://tasks.example.test',
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc.close();
    await model.close();
    await server.close();
  });

  const connect = (id: string, key = org.apiKey) =>
    svc.call({ method: 'POST', url: `/api/svc/sources/${id}/connect`, key });
  const read = async (id: string) =>
    (await svc.call({ method: 'GET', url: `/api/svc/sources/${id}`, key: org.apiKey })).body;
  const newConnectorSource = (name: string, toolkit = 'github') =>
    create(svc, org, 'sources', {
      type: 'mcp',
      name,
      slug: name.toLowerCase().replaceAll(' ', '-'),
      config: {},
      authType: 'connector',
      authConfig: { provider: toolkit },
    });
  /** The provider ends the source's account; then the source's connection test (POST /test). */
  async function expireAndTest(sourceId: string) {
    for (const account of server.accounts.values())
      if (account.userId.endsWith(sourceId)) account.status = 'EXPIRED';
    return svc.call({ method: 'POST', url: `/api/svc/sources/${sourceId}/test`, key: org.apiKey });
  }
  /** The person signs in at the provider, whose page sends the browser to the service's callback. */
  async function signIn(linkUrl: string) {
    const { callbackUrl } = await server.signIn(linkUrl);
    const callback = new URL(callbackUrl);
    assert.equal(callback.origin, 'https://tasks.example.test');
    return svc.call({ method: 'GET', url: `${callback.pathname}${callback.search}` });
  }

  test('a run of a task with a connector source gets the tool from the provider and completes with its result', async () => {
    const source = await newConnectorSource('GitHub');
    const task = await newTask(svc, org, {
      prompt: 'call GITHUB_GET_A_REPOSITORY {"owner":"octo","repo":"cat"}',
      sourceIds: [source.id],
    });

    // Before the sign-in the run fails, naming the source and how to connect it.
    const early = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(early.status, 'failed');
    assert.match(
      early.error,
      /source "GitHub": not connected to the connector provider \(it was never connected\)/,
    );
    assert.match(early.error, new RegExp(`POST /api/svc/sources/${source.id}/connect`));

    const started = await connect(source.id);
    assert.equal(started.status, 200, started.raw);
    assert.match(started.body.url, /^http:\/\/127\.0\.0\.1:\d+\/link\/lk_/);
    const link = server.requests.findLast((r) => r.path === '/api/v3/connected_accounts/link');
    assert.equal(link?.body?.user_id, `svc:${org.organizationId}:${source.id}`);
    assert.equal((await read(source.id)).connectorConnected ?? false, false);

    const back = await signIn(started.body.url);
    assert.equal(back.status, 303, back.raw);
    assert.equal(back.headers.location, `/dashboard/sources/${source.id}?done=connected`);
    const connected = await read(source.id);
    assert.equal(connected.connectorConnected, true);
    assert.equal(connected.connectorToolkit, 'github');
    assert.equal(connected.isActive, true);
    assert.ok(connected.lastConnectedAt);

    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.output, 'The tool said: {"full_name":"octo/cat","stargazers_count":42}');
    const offered = model.requests.at(-1)?.body.tools?.map((t) => t.function.name) ?? [];
    assert.ok(offered.includes('github__GITHUB_GET_A_REPOSITORY'), `${offered}`);
    const execute = server.requests.findLast(
      (r) => r.path === '/api/v3/tools/execute/GITHUB_GET_A_REPOSITORY',
    );
    assert.deepEqual(execute?.body?.arguments, { owner: 'octo', repo: 'cat' });
    assert.equal(execute?.body?.user_id, `svc:${org.organizationId}:${source.id}`);
  });

  test('an account the provider expired fails the run and the test, and connectorConnected follows', async () => {
    const source = await newConnectorSource('Expiring');
    await signIn((await connect(source.id)).body.url);
    assert.equal((await read(source.id)).connectorConnected, true);
    const tested = await expireAndTest(source.id);
    assert.equal(tested.body.success, false);
    assert.match(tested.body.message, /source "Expiring": not connected .*its composio account is EXPIRED/);
    const after = await read(source.id);
    assert.equal(after.connectorConnected, false);
    assert.equal(after.isActive, false);

    const task = await newTask(svc, org, {
      prompt: 'call GITHUB_GET_A_REPOSITORY {}',
      sourceIds: [source.id],
    });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'failed');
    assert.match(run.error, /source "Expiring": not connected/);
  });

  test('connect answers 409 for a source without a sign-in or without a toolkit, 404 for another organization', async () => {
    const bearer = await create(svc, org, 'sources', {
      type: 'api',
      name: 'Plain API',
      config: { baseUrl: 'https://api.example.test' },
      authType: 'bearer',
      authConfig: { token: 'tok' },
    });
    const refused = await connect(bearer.id);
    assert.equal(refused.status, 409, refused.raw);
    assert.match(refused.body.error.message, /authType bearer, which has no sign-in to start/);

    const noToolkit = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'No toolkit',
      config: {},
      authType: 'connector',
    });
    const missing = await connect(noToolkit.id);
    assert.equal(missing.status, 409, missing.raw);
    assert.match(missing.body.error.message, /names its toolkit in authConfig.provider/);

    const other = await svc.createOrg('free');
    const source = await newConnectorSource('Mine');
    const foreign = await connect(source.id, other.apiKey);
    assert.equal(foreign.status, 404, foreign.raw);
  });

  test('a toolkit the operator did not set up at the provider is a 503 connector_not_configured naming it', async () => {
    const source = await newConnectorSource('Mail', 'gmail');
    const res = await connect(source.id);
    assert.equal(res.status, 503, res.raw);
    assert.equal(res.body.error.code, 'connector_not_configured');
    assert.match(
      res.body.error.message,
      /source "Mail": composio has no enabled auth config for toolkit "gmail"/,
    );
  });

  test("the dashboard shows a connector source's state, and its Connect button sends the browser to the provider", async () => {
    const source = await newConnectorSource('Dashboard GitHub');
    const email = `owner-${randomUUID()}@example.com`;
    const password = 'correct horse battery staple';
    const user = await svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${org.organizationId}/users`,
      admin: true,
      body: { email, password },
    });
    assert.equal(user.status, 201, user.raw);
    const session = await signInUser(svc.service.deps, { email, password });
    assert.ok(session);
    const cookie = `svc_session=${session.token}`;
    const page = async (url: string) =>
      (await svc.app.inject({ method: 'GET', url, headers: { cookie } })).body;

    // The form suggests the provider's toolkits for the toolkit field.
    const form = await page('/dashboard/sources/new');
    assert.match(form, /<input id="provider" name="provider"[^>]*list="toolkits"/);
    assert.match(form, /<datalist id="toolkits"><option value="github">Github<\/option><\/datalist>/);

    const before = await page(`/dashboard/sources/${source.id}`);
    assert.match(
      before,
      /<th scope="row">Connector<\/th><td><span class="badge inactive">inactive<\/span> not connected/,
    );
    assert.match(before, /<code>github<\/code>/);
    assert.match(
      before,
      new RegExp(
        `action="/dashboard/sources/${source.id}/connect"[^>]*>.*<button type="submit">Connect</button>`,
      ),
    );

    const connect = await svc.app.inject({
      method: 'POST',
      url: `/dashboard/sources/${source.id}/connect`,
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf: session.csrfToken }).toString(),
    });
    assert.equal(connect.statusCode, 303, connect.body);
    const back = await signIn(String(connect.headers.location));
    assert.equal(back.headers.location, `/dashboard/sources/${source.id}?done=connected`);
    const after = await page(String(back.headers.location));
    assert.match(after, /Signed in at the connector provider: the source is connected/);
    assert.match(after, /<span class="badge active">active<\/span> connected/);
    assert.match(after, /<button type="submit">Reconnect<\/button>/);

    // The provider ends the account: the page asks again (after a minute at most) and shows it.
    const tested = await expireAndTest(source.id);
    assert.equal(tested.body.success, false);
    assert.match(await page(`/dashboard/sources/${source.id}`), /not connected/);
  });

  test('a callback state that the service did not seal is a 400, and nothing is asked of the provider', async () => {
    const before = server.requests.length;
    for (const state of ['forged', 'v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']) {
      const res = await svc.call({ method: 'GET', url: `/api/svc/connectors/callback?state=${state}` });
      assert.equal(res.status, 400, res.raw);
      assert.equal(res.body.error.details[0].path, '/query/state');
    }
    const none = await svc.call({ method: 'GET', url: '/api/svc/connectors/callback' });
    assert.equal(none.status, 400, none.raw);
    assert.equal(server.requests.length, before);
  });
});

test('without a connector provider, connect is a 503 and a run fails with "connector provider not configured"', async () => {
  const svc = await startTestService();
  try {
    const org = await svc.createOrg('paid');
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Unconfigured',
      config: {},
      authType: 'connector',
      authConfig: { provider: 'github' },
    });
    const res = await svc.call({
      method: 'POST',
      url: `/api/svc/sources/${source.id}/connect`,
      key: org.apiKey,
    });
    assert.equal(res.status, 503, res.raw);
    assert.equal(res.body.error.code, 'connector_not_configured');
    assert.match(res.body.error.message, /^connector provider not configured/);
    const tested = await svc.call({
      method: 'POST',
      url: `/api/svc/sources/${source.id}/test`,
      key: org.apiKey,
    });
    assert.equal(tested.body.success, false);
    assert.match(tested.body.message, /source "Unconfigured": connector provider not configured/);
  } finally {
    await svc.close();
  }
});

test('the provider is configured by environment: the key is required with it, and only known providers are taken', () => {
  const base = { SVC_DATA_DIR: 'memory://', SVC_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') };
  assert.equal(loadConfig(base).connector, undefined);
  assert.throws(
    () => loadConfig({ ...base, SVC_CONNECTOR_PROVIDER: 'composio' }),
    /invalid configuration: SVC_CONNECTOR_API_KEY is required when SVC_CONNECTOR_PROVIDER is set/,
  );
  assert.throws(
    () => loadConfig({ ...base, SVC_CONNECTOR_PROVIDER: 'zapier', SVC_CONNECTOR_API_KEY: 'k' }),
    /invalid configuration: SVC_CONNECTOR_PROVIDER must be one of composio/,
  );
  const config = loadConfig({
    ...base,
    SVC_CONNECTOR_PROVIDER: 'Composio',
    SVC_CONNECTOR_API_KEY: 'ak_1',
    SVC_CONNECTOR_API_BASE: 'https://proxy.example.com/composio/',
  });
  assert.deepEqual(config.connector, {
    provider: 'composio',
    apiKey: 'ak_1',
    apiBase: 'https://proxy.example.com/composio',
  });
  assert.equal(
    loadConfig({ ...base, SVC_CONNECTOR_PROVIDER: 'composio', SVC_CONNECTOR_API_KEY: 'k' }).connector
      ?.apiBase,
    'https://backend.composio.dev',
  );
});
