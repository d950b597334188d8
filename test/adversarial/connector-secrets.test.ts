// Adversarial tests of the connector provider's secrets: the service's API key at the provider
// (SVC_CONNECTOR_API_KEY) and the end users' tokens the provider holds (which its account
// answers carry in `state`). The key reaches the provider as `x-api-key` and nothing else; the
// tokens never leave the provider's answers. A provider that echoes the key in its error texts,
// at sign-in, in a tool call or on a refused key, gets it blanked: no API answer, dashboard page,
// log line, model request, run error or database row shows either, whole or in part.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { signIn as signInUser } from '../../src/domain/users.ts';
import { type ConnectorServer, startConnectorServer } from '../helpers/connector-server.ts';
import type { ModelReply, ModelRequest, ModelServer } from '../helpers/model-server.ts';
import {
  create,
  finishedRun,
  newTask,
  type Org,
  runNow,
  startWorkerService,
  unlimited,
} from '../helpers/runs.ts';
import type { Reply, TestService } from '../helpers/service.ts';
import { allRows } from './at-rest.ts';

const KEY = `canary-connector-key-${randomBytes(16).toString('hex')}`;

/** The secret whole, every 12-character piece of its random part, and its base64 and hex forms. */
function patterns(secrets: readonly string[]): string[] {
  const out = new Set<string>();
  for (const secret of secrets) {
    out.add(secret);
    const random = secret.slice(secret.lastIndexOf('-') + 1);
    for (let i = 0; i + 12 <= random.length; i++) out.add(random.slice(i, i + 12));
    out.add(Buffer.from(secret).toString('hex'));
    out.add(Buffer.from(secret).toString('base64').slice(4, -4));
  }
  return [...out];
}

function assertNone(where: string, text: string, secrets: readonly string[]): void {
  const found = patterns(secrets).filter((p) => text.includes(p));
  assert.deepEqual(found, [], `${where} shows a secret (whole, in part or encoded)`);
}

function callTool(prompt: string, request: ModelRequest): ModelReply {
  const toolResult = request.body.messages.find((m) => m.role === 'tool');
  if (toolResult) return { content: `The tool said: ${toolResult.content}` };
  const name = request.body.tools?.map((t) => t.function.name).find((n) => n.endsWith('__ECHO_TOOL'));
  if (!name || !prompt.startsWith('call')) return { content: 'no tool' };
  return { toolCalls: [{ name, arguments: '{"text":"hello"}' }] };
}

describe('the connector provider key and the end users tokens stay secret', () => {
  let svc: TestService;
  let model: ModelServer;
  let server: ConnectorServer;
  let org: Org;
  const answers: Reply[] = [];
  const call = async (o: Parameters<TestService['call']>[0]) => {
    const res = await svc.call(o);
    answers.push(res);
    return res;
  };

  before(async () => {
    server = await startConnectorServer({ apiKey: KEY });
    server.tools.set('github', [
      {
        slug: 'ECHO_TOOL',
        name: 'Echo',
        description: 'Echoes its text',
        version: '1',
        input_parameters: { type: 'object', properties: { text: { type: 'string' } } },
        run: (args) => ({ echoed: args.text }),
      },
    ]);
    server.authConfigs.set('github', [{ id: 'ac_github', status: 'ENABLED' }]);
    ({ svc, model } = await startWorkerService((prompt, _i, request) => callTool(prompt, request), {
      SVC_CONNECTOR_PROVIDER: 'composio',
      SVC_CONNECTOR_API_KEY: KEY,
      SVC_CONNECTOR_API_BASE: server.url,
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_LOG_LEVEL: 'debug',
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc.close();
    await model.close();
    await server.close();
  });

  test('the key reaches the provider as x-api-key only, and no answer, log, model request, page or row shows it or a token', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'GitHub',
      config: {},
      authType: 'connector',
      authConfig: { provider: 'github' },
    });
    const task = await newTask(svc, org, { prompt: 'call the tool', sourceIds: [source.id] });
    const connectUrl = `/api/svc/sources/${source.id}/connect`;

    // A provider that quotes the key in its refusals and failures.
    server.failNext('/api/v3/auth_configs', 401, { error: { message: `Invalid API key: ${KEY}` } });
    const refused = await call({ method: 'POST', url: connectUrl, key: org.apiKey });
    assert.equal(refused.status, 503, refused.raw);
    assert.match(
      refused.body.error.message,
      /refused the service's API key \(HTTP 401: Invalid API key: \[redacted\]\)/,
    );
    server.failNext('/api/v3/connected_accounts/link', 500, {
      error: { message: `upstream failed for ${KEY}` },
    });
    const failed = await call({ method: 'POST', url: connectUrl, key: org.apiKey });
    assert.equal(failed.status, 503, failed.raw);
    server.failNext('/api/v3/connected_accounts', 400, { message: `bad request with key ${KEY}` });
    await call({ method: 'POST', url: `/api/svc/sources/${source.id}/test`, key: org.apiKey });
    const notYet = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(notYet.status, 'failed');

    // The sign-in, then a run whose first tool call the provider fails quoting the key.
    const started = await call({ method: 'POST', url: connectUrl, key: org.apiKey });
    assert.equal(started.status, 200, started.raw);
    const { callbackUrl } = await server.signIn(started.body.url);
    const back = new URL(callbackUrl);
    await call({ method: 'GET', url: `${back.pathname}${back.search}` });
    server.failNext('/api/v3/tools/execute/ECHO_TOOL', 200, {
      data: {},
      error: `execution refused for key ${KEY}`,
      successful: false,
    });
    const failedCall = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(failedCall.status, 'completed', failedCall.error);
    assert.match(failedCall.output, /without success: execution refused for key \[redacted\]/);
    const good = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(good.output, 'The tool said: {"echoed":"hello"}');
    for (const runId of [notYet.id, failedCall.id, good.id])
      await call({ method: 'GET', url: `/api/svc/runs/${runId}`, key: org.apiKey });
    await call({ method: 'GET', url: `/api/svc/sources/${source.id}`, key: org.apiKey });
    await call({
      method: 'GET',
      url: `/api/svc/sources?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });

    // Every provider request carried the key in x-api-key and nowhere else.
    const apiRequests = server.requests.filter((r) => r.path.startsWith('/api/v3/'));
    assert.ok(apiRequests.length > 5);
    for (const r of apiRequests) {
      assert.equal(r.apiKey, KEY, `${r.method} ${r.path}`);
      assertNone(`the request ${r.method} ${r.path}`, `${r.path}?${r.query}${JSON.stringify(r.body ?? {})}`, [
        KEY,
      ]);
    }

    const email = `owner-${randomBytes(4).toString('hex')}@example.com`;
    const password = 'correct horse battery staple';
    await call({
      method: 'POST',
      url: `/api/admin/organizations/${org.organizationId}/users`,
      admin: true,
      body: { email, password },
    });
    const session = await signInUser(svc.service.deps, { email, password });
    assert.ok(session);
    const pages: string[] = [];
    for (const url of [
      '/dashboard/sources',
      `/dashboard/sources/${source.id}`,
      `/dashboard/sources/${source.id}/edit`,
    ]) {
      const res: LightMyRequestResponse = await svc.app.inject({
        method: 'GET',
        url,
        headers: { cookie: `svc_session=${session.token}` },
      });
      assert.equal(res.statusCode, 200, url);
      pages.push(res.body);
    }

    const tokens = [...server.accounts.values()].map((a) => a.accessToken);
    assert.ok(tokens.length >= 1);
    const secrets = [KEY, ...tokens];
    assertNone(
      'the API answers',
      answers.map((a) => `${JSON.stringify(a.headers)}${a.raw}`).join('\n'),
      secrets,
    );
    assertNone('the dashboard', pages.join('\n'), secrets);
    assertNone('the logs', svc.logs.join('\n'), secrets);
    assertNone('the model requests', JSON.stringify(model.requests), secrets);
    assertNone('the database', await allRows(svc.testDb.db), secrets);
  });
});
