// Adversarial tests of sources' OAuth sign-ins. The secrets of a sign-in (access and refresh
// tokens, the authorization code, the PKCE verifier, a dynamically registered client's secret)
// reach the provider and the MCP server only: no API answer, dashboard page, log line (at the
// most verbose level), model request, delivery or database row holds one, whole, cut short or
// merely encoded. A sign-in's state is bound, single-use and short-lived; what providers answer
// is bounded; and the private-address guard covers discovery and token requests.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { signUp } from '../../src/domain/users.ts';
import type { ModelReply, ModelRequest, ModelServer } from '../helpers/model-server.ts';
import { type OAuthMcpServer, startOAuthMcpServer } from '../helpers/oauth-mcp-server.ts';
import { finishedRun, type Org, startWorkerService, unlimited } from '../helpers/runs.ts';
import { type CallOptions, type Reply, startTestService, type TestService } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';
import { allRows } from './at-rest.ts';

const PUBLIC_URL = 'http://tasks.example';

/** What a leak looks like: each secret whole, any 12 characters of it, its hex and base64. */
function patterns(secrets: readonly string[]): string[] {
  const out = new Set<string>();
  for (const secret of secrets) {
    const random = secret.startsWith('canary-') ? secret.slice(secret.lastIndexOf('-') + 1) : secret;
    out.add(secret);
    for (let i = 0; i + 12 <= random.length; i += 4) out.add(random.slice(i, i + 12));
    out.add(Buffer.from(secret).toString('hex'));
    out.add(Buffer.from(secret).toString('base64').slice(4, -4));
  }
  return [...out];
}

function assertNoSecret(where: string, text: string, secrets: readonly string[]): void {
  const hit = patterns(secrets).find((p) => text.includes(p));
  assert.equal(hit, undefined, `${where} holds a piece of a sign-in secret`);
}

function callWhoami(request: ModelRequest): ModelReply {
  const result = request.body.messages.find((m) => m.role === 'tool');
  if (result) return { content: `The tool said: ${result.content}` };
  const name = request.body.tools?.map((t) => t.function.name).find((n) => n.endsWith('__whoami'));
  return name ? { toolCalls: [{ name, arguments: {} }] } : { content: 'no tool offered' };
}

/** What a browser does with the connect URL: the provider approves, the callback is followed. */
async function signIn(svc: TestService, url: string) {
  const approved = await fetch(url, { redirect: 'manual' });
  const callback = new URL(approved.headers.get('location') ?? '');
  return svc.app.inject({ method: 'GET', url: `${callback.pathname}${callback.search}` });
}

describe('the secrets of an OAuth sign-in', () => {
  let svc: TestService;
  let model: ModelServer;
  let provider: OAuthMcpServer;
  let hook: WebhookReceiver;
  let org: Org;
  let session: string;
  const answers: string[] = [];
  const call = async (o: CallOptions): Promise<Reply> => {
    const reply = await svc.call(o);
    answers.push(JSON.stringify(reply.headers), reply.raw);
    return reply;
  };

  before(async () => {
    provider = await startOAuthMcpServer();
    hook = await startWebhookReceiver();
    ({ svc, model } = await startWorkerService((_p, _i, request) => callWhoami(request), {
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_PUBLIC_URL: PUBLIC_URL,
      SVC_LOG_LEVEL: 'trace',
    }));
    const made = await signUp(svc.service.deps, {
      email: `owner-${randomUUID()}@example.com`,
      password: 'correct horse battery',
      organizationName: 'Signed in',
    });
    session = made.session.token;
    const key = await svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${made.organizationId}/keys`,
      admin: true,
      body: { name: 'oauth' },
    });
    assert.equal(key.status, 201, key.raw);
    org = { organizationId: made.organizationId, apiKey: key.body.apiKey };
    await unlimited(svc, org);
  });
  after(async () => {
    await svc.close();
    await model.close();
    await provider.close();
    await hook.close();
  });

  test('a sign-in, runs, a refresh and a revoked sign-in leave no secret in answers, pages, logs, model requests, deliveries or rows', async () => {
    const body = (extra: Record<string, unknown>) => ({ organizationId: org.organizationId, ...extra });
    const source = (
      await call({
        method: 'POST',
        url: '/api/svc/sources',
        key: org.apiKey,
        body: body({ type: 'mcp', name: 'Inbox', config: { url: provider.mcpUrl }, authType: 'oauth' }),
      })
    ).body;
    const started = await call({
      method: 'POST',
      url: `/api/svc/sources/${source.id}/connect`,
      key: org.apiKey,
    });
    assert.equal(started.status, 200, started.raw);
    const done = await signIn(svc, started.body.url);
    assert.equal(done.statusCode, 303);
    answers.push(done.body, JSON.stringify(done.headers));
    const task = (
      await call({
        method: 'POST',
        url: '/api/svc/tasks',
        key: org.apiKey,
        body: body({
          name: 'Mail digest',
          prompt: 'Who am I?',
          schedule: 'daily',
          sourceIds: [source.id],
          destinations: [{ type: 'webhook', value: hook.url }],
        }),
      })
    ).body;
    const run = async () => {
      const id = (await call({ method: 'POST', url: `/api/svc/tasks/${task.id}/run`, key: org.apiKey })).body
        .id;
      await finishedRun(svc, org, id, 30_000);
      return (await call({ method: 'GET', url: `/api/svc/runs/${id}`, key: org.apiKey })).body;
    };
    assert.equal((await run()).status, 'completed');
    provider.expireAccessTokens();
    assert.equal((await run()).status, 'completed');
    provider.expireAccessTokens();
    provider.revokeRefreshTokens();
    const failed = await run();
    assert.equal(failed.status, 'failed');
    await waitFor('the deliveries', async () => (hook.requests.length >= 4 ? true : undefined));
    for (const path of [
      '/api/svc/sources',
      `/api/svc/sources/${source.id}`,
      `/api/svc/tasks/${task.id}?expand=sources`,
    ])
      await call({
        method: 'GET',
        url: `${path}${path.includes('?') ? '&' : '?'}organizationId=${org.organizationId}`,
        key: org.apiKey,
      });
    const page = await svc.app.inject({
      method: 'GET',
      url: `/dashboard/sources/${source.id}`,
      cookies: { svc_session: session },
    });
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /id="oauth-state">expired/);

    const secrets = provider.secrets();
    assert.ok(secrets.length >= 7, 'tokens, a code, a client secret and a verifier were handed out');
    assertNoSecret('an API answer', answers.join('\n'), secrets);
    assertNoSecret('the source page', page.body, secrets);
    assertNoSecret('a log line', svc.logs.join('\n'), secrets);
    assertNoSecret('a model request', JSON.stringify(model.requests), secrets);
    assertNoSecret(
      'a delivery',
      hook.requests.map((r) => `${JSON.stringify(r.headers)}\n${r.body}`).join('\n'),
      secrets,
    );
    assertNoSecret('a database row', await allRows(svc.testDb.db), secrets);
  });

  test('a state works once, for its own sign-in, within 10 minutes; anything else completes nothing', async () => {
    const source = (
      await call({
        method: 'POST',
        url: '/api/svc/sources',
        key: org.apiKey,
        body: {
          organizationId: org.organizationId,
          type: 'mcp',
          name: 'States',
          config: { url: provider.mcpUrl },
          authType: 'oauth',
        },
      })
    ).body;
    const connect = async () =>
      (await svc.call({ method: 'POST', url: `/api/svc/sources/${source.id}/connect`, key: org.apiKey })).body
        .url as string;
    const callback = async (url: string) => {
      const approved = await fetch(url, { redirect: 'manual' });
      const target = new URL(approved.headers.get('location') ?? '');
      return `${target.pathname}${target.search}`;
    };
    const open = (path: string) => svc.app.inject({ method: 'GET', url: path });
    const stored = async () =>
      (await svc.testDb.db.query('SELECT 1 FROM source_oauth WHERE source_id = $1', [source.id])).length;

    // Replaced: a newer connect makes the older state unknown.
    const older = await callback(await connect());
    const newer = await callback(await connect());
    assert.equal((await open(older)).statusCode, 400);
    // Expired: 10 minutes have passed (moved in the database).
    await svc.testDb.db.query(
      "UPDATE source_oauth_states SET expires_at = now() - interval '1 second' WHERE source_id = $1",
      [source.id],
    );
    const expired = await open(newer);
    assert.equal(expired.statusCode, 400);
    assert.match(expired.body, /expired/);
    // Forged, oversized, missing, or the provider's refusal.
    const fresh = await callback(await connect());
    const code = new URL(fresh, PUBLIC_URL).searchParams.get('code');
    for (const path of [
      `/oauth/callback?state=${'A'.repeat(43)}&code=${code}`,
      `/oauth/callback?state=${'A'.repeat(5000)}&code=${code}`,
      `/oauth/callback?code=${code}`,
      '/oauth/callback?state[]=x&code=y',
    ])
      assert.equal((await open(path)).statusCode, 400, path);
    assert.equal(await stored(), 0, 'nothing was stored');
    const state = new URL(fresh, PUBLIC_URL).searchParams.get('state') ?? '';
    const denied = await open(`/oauth/callback?state=${encodeURIComponent(state)}&error=access_denied`);
    assert.equal(denied.statusCode, 400);
    assert.match(denied.body, /did not grant access/);
    assert.equal((await open(fresh)).statusCode, 400, 'the refused sign-in used its state');
    assert.equal(await stored(), 0);
    // The pending states kept in the database are hashes, never the state itself.
    const kept = await callback(await connect());
    const keptState = new URL(kept, PUBLIC_URL).searchParams.get('state') ?? '';
    assert.ok(!(await allRows(svc.testDb.db)).includes(keptState));
    assert.equal((await open(kept)).statusCode, 303);
    assert.equal(await stored(), 1);
  });
});

/** A hand-made MCP server and authorization server whose answers a test chooses. */
async function startScriptedProvider(mode: 'huge-registration' | 'huge-token' | 'script-endpoint') {
  let requests = 0;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests++;
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const url = new URL(req.url ?? '/', base);
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(typeof value === 'string' ? value : JSON.stringify(value));
    };
    const huge = `{"padding":"${'x'.repeat(1024 * 1024)}"}`;
    if (url.pathname === '/mcp') {
      res.writeHead(401, {
        'www-authenticate': `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
      });
      return res.end();
    }
    if (url.pathname.startsWith('/.well-known/oauth-protected-resource'))
      return json(200, { resource: `${base}/mcp`, authorization_servers: [base] });
    if (url.pathname.startsWith('/.well-known/oauth-authorization-server'))
      return json(200, {
        issuer: base,
        authorization_endpoint:
          mode === 'script-endpoint' ? 'javascript:alert(document.cookie)//' : `${base}/authorize`,
        token_endpoint: `${base}/token`,
        registration_endpoint: `${base}/register`,
        response_types_supported: ['code'],
        code_challenge_methods_supported: ['S256'],
      });
    if (url.pathname === '/register')
      return json(
        201,
        mode === 'huge-registration'
          ? huge
          : { client_id: 'scripted', redirect_uris: [`${PUBLIC_URL}/oauth/callback`] },
      );
    if (url.pathname === '/token') return json(200, huge);
    return json(404, {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    mcpUrl: `${base}/mcp`,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('what OAuth providers answer is bounded, and the address guard applies', () => {
  test('a registration or token answer over 64 KiB fails the sign-in cleanly; a private address is refused unasked', async () => {
    const svc = await startTestService({
      env: { SVC_ALLOW_PRIVATE_URLS: 'true', SVC_PUBLIC_URL: PUBLIC_URL },
    });
    const guarded = await startTestService({ env: { SVC_PUBLIC_URL: PUBLIC_URL } });
    const hugeRegistration = await startScriptedProvider('huge-registration');
    const hugeToken = await startScriptedProvider('huge-token');
    try {
      const org = await svc.createOrg('paid');
      const source = async (s: TestService, o: Org, url: string) => {
        const res = await s.call({
          method: 'POST',
          url: '/api/svc/sources',
          key: o.apiKey,
          body: {
            organizationId: o.organizationId,
            type: 'mcp',
            name: `S ${randomUUID()}`,
            config: { url },
            authType: 'oauth',
          },
        });
        return res.body.id as string;
      };
      const connect = (s: TestService, o: Org, id: string) =>
        s.call({ method: 'POST', url: `/api/svc/sources/${id}/connect`, key: o.apiKey });

      const big = await connect(svc, org, await source(svc, org, hugeRegistration.mcpUrl));
      assert.equal(big.status, 502, big.raw);
      assert.equal(big.body.error.code, 'upstream_error');
      assert.match(big.body.error.message, /larger than 64 KiB/);

      // An authorization endpoint that is not a web page is never handed to a browser.
      const script = await startScriptedProvider('script-endpoint');
      try {
        const scripted = await connect(svc, org, await source(svc, org, script.mcpUrl));
        assert.equal(scripted.status, 502, scripted.raw);
        assert.ok(!scripted.raw.includes('document.cookie'));
      } finally {
        await script.close();
      }

      const tokenSource = await source(svc, org, hugeToken.mcpUrl);
      const started = await connect(svc, org, tokenSource);
      assert.equal(started.status, 200, started.raw);
      const state = new URL(started.body.url).searchParams.get('state') ?? '';
      const done = await svc.app.inject({
        method: 'GET',
        url: `/oauth/callback?state=${encodeURIComponent(state)}&code=abc`,
      });
      assert.equal(done.statusCode, 400);
      assert.match(done.body, /refused the sign-in/);
      assert.equal((await svc.testDb.db.query('SELECT 1 FROM source_oauth')).length, 0);

      // SVC_ALLOW_PRIVATE_URLS=false: discovery never reaches 127.0.0.1.
      const other = await guarded.createOrg('paid');
      const before = hugeToken.requests();
      const refused = await connect(guarded, other, await source(guarded, other, hugeToken.mcpUrl));
      assert.equal(refused.status, 502, refused.raw);
      assert.match(refused.body.error.message, /private|not allowed|refused/i);
      assert.equal(hugeToken.requests(), before, 'no request reached the private address');
    } finally {
      await hugeRegistration.close();
      await hugeToken.close();
      await svc.close();
      await guarded.close();
    }
  });
});
