import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import Stripe from 'stripe';
import { assertEnvelope } from './helpers/assertions.ts';
import { type ConnectorServer, startConnectorServer } from './helpers/connector-server.ts';
import { recordRunOutcome } from './helpers/fixtures.ts';
import { type OAuthMcpServer, startOAuthMcpServer } from './helpers/oauth-mcp-server.ts';
import {
  fieldProblems,
  hasOperation,
  type OpenApiDocument,
  operationsUnder,
  ResponseContract,
  requestBodySchema,
  schemaAt,
  splitOperation as split,
} from './helpers/openapi-contract.ts';
import { BODY_LOCATIONS, endpointProblems, one, RESOURCE_LOCATIONS } from './helpers/openapi-spec-map.ts';
import { type CallOptions, type Reply, startTestService, type TestService } from './helpers/service.ts';
import { loadSpec } from './helpers/spec-facts.ts';
import { bodyFields, keysOfNote } from './helpers/spec-tables.ts';
import { type StripeTestServer, startStripeServer } from './helpers/stripe-server.ts';

const WEBHOOK_SECRET = 'whsec_contract_test_secret';

/**
 * The interface specification's facts, the project's own copy (test/spec-facts.json, regenerated
 * by `npm run spec-facts`; test/contract-spec-sync.test.ts keeps it equal to the spec).
 */
const spec = loadSpec();

/**
 * Operations of the spec not built yet: their endpoints, resources and bodies are checked once
 * they are in the document, and skipped (not failed) while they are absent. None at present.
 */
const NOT_BUILT = new Set<string>();
// Where the document carries each resource and request body of the spec: RESOURCE_LOCATIONS
// and BODY_LOCATIONS in helpers/openapi-spec-map.ts.

describe('the contract: the OpenAPI document, the interface spec and the responses', () => {
  let svc: TestService;
  let doc: OpenApiDocument;
  let contract: ResponseContract;
  let org: { organizationId: string; apiKey: string };
  let other: { organizationId: string; apiKey: string };
  let stripe: StripeTestServer;
  let connector: ConnectorServer;
  let oauthServer: OAuthMcpServer | undefined;

  /** A call whose response is checked against the document; the key defaults to `org`'s. */
  const api = async (
    method: CallOptions['method'],
    url: string,
    o: Partial<CallOptions> = {},
  ): Promise<Reply> => {
    const res = await svc.call({ method, url, key: org.apiKey, ...o });
    contract.check(String(method), url, res);
    return res;
  };
  /** As `api`, and the status must be the one given. */
  const expect = async (
    status: number,
    method: CallOptions['method'],
    url: string,
    o: Partial<CallOptions> = {},
  ) => {
    const res = await api(method, url, o);
    assert.equal(res.status, status, `${method} ${url}: ${res.raw}`);
    return res.body;
  };
  const orgQuery = () => `organizationId=${org.organizationId}`;
  const admin = async (method: CallOptions['method'], url: string, body?: unknown) => {
    const res = await svc.call({ method, url, admin: true, body });
    assert.ok(res.status < 300, res.raw);
    return res.body;
  };

  before(async () => {
    // The api role alone: no scheduler or worker touches the runs this test shapes.
    stripe = await startStripeServer();
    connector = await startConnectorServer();
    connector.authConfigs.set('github', [{ id: 'ac_github', status: 'ENABLED' }]);
    svc = await startTestService({
      env: {
        SVC_CONNECTOR_PROVIDER: 'composio',
        SVC_CONNECTOR_API_KEY: connector.apiKey,
        SVC_CONNECTOR_API_BASE: connector.url,
        // The connector stand-in and a source's OAuth authorization server are on 127.0.0.1.
        SVC_ALLOW_PRIVATE_URLS: 'true',
        SVC_ROLE: 'api',
        SVC_STDIO_COMMANDS: 'node[TOKEN]',
        STRIPE_SECRET_KEY: 'sk_test_contract',
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        STRIPE_PRICE_ID: 'price_contract',
        SVC_STRIPE_API_BASE: stripe.url,
      },
    });
    const res = await svc.call({ method: 'GET', url: '/api/svc/openapi.json' });
    assert.equal(res.status, 200, res.raw);
    doc = res.body;
    contract = new ResponseContract(doc);
    contract.check('GET', '/api/svc/openapi.json', res);
    org = await svc.createOrg('paid');
    other = await svc.createOrg('paid');
    await admin('PATCH', `/api/admin/organizations/${org.organizationId}`, { rateLimitPerMinute: 100_000 });
  });
  after(async () => {
    await svc?.close();
    await stripe?.close();
    await connector?.close();
    await oauthServer?.close();
  });

  describe('the document against the spec', () => {
    test('the spec yields the field tables and request bodies this test checks, no more and no fewer', () => {
      assert.deepEqual([...spec.resources.keys()].sort(), Object.keys(RESOURCE_LOCATIONS).sort());
      assert.deepEqual([...spec.bodies.keys()].sort(), Object.keys(BODY_LOCATIONS).sort());
    });

    for (const [name, locations] of Object.entries(RESOURCE_LOCATIONS)) {
      const ops = [...new Set(locations.map((l) => l.op))];
      test(`every ${name} field of the spec is in ${ops.join(', ')} with its type, enum values and required-ness`, (t) => {
        const present = locations.filter((l) => hasOperation(doc, l.op));
        if (present.length === 0 && locations.every((l) => NOT_BUILT.has(l.op))) {
          t.skip(`${ops.join(' and ')} not built yet`);
          return;
        }
        const fields = spec.resources.get(name);
        assert.ok(fields, `the spec has ${name}`);
        const problems: string[] = [];
        for (const loc of locations) {
          if (!hasOperation(doc, loc.op)) {
            assert.ok(NOT_BUILT.has(loc.op), `${loc.op} is in the document`);
            continue;
          }
          const schema = schemaAt(doc, loc);
          const where = `${loc.op} ${loc.status ?? ''}${loc.at?.length ? ` ${loc.at.join('.')}` : ''}`;
          if (!schema) problems.push(`${where}: no JSON schema`);
          else problems.push(...fieldProblems(doc, schema, fields, where, { resources: spec.resources }));
        }
        assert.deepEqual(problems, []);
      });
    }

    for (const [name, op] of Object.entries(BODY_LOCATIONS)) {
      test(`the ${name} body of ${op} has the spec's fields and requires exactly the spec's required ones`, () => {
        const fields = bodyFields(spec, name);
        assert.ok(fields.length > 0, `the spec lists the ${name} body`);
        const { method, path } = split(op);
        const schema = requestBodySchema(doc, method, path);
        const problems = fieldProblems(doc, schema, fields, op, {
          resources: spec.resources,
          nullClearsOptional: true,
        });
        const specRequired = fields.filter((f) => f.required).map((f) => f.name);
        for (const r of schema.required ?? []) {
          if (!specRequired.includes(r)) problems.push(`${op}.${r}: required, the spec does not require it`);
        }
        assert.deepEqual(problems, []);
      });
    }

    test('the task create body requires name, organizationId and prompt', () => {
      assert.deepEqual([...(requestBodySchema(doc, 'post', '/api/svc/tasks').required ?? [])].sort(), [
        'name',
        'organizationId',
        'prompt',
      ]);
    });

    test("the task create body carries the spec's request constraints: lengths, formats and a 24-hour HH:MM time", () => {
      const body = requestBodySchema(doc, 'post', '/api/svc/tasks');
      assert.deepEqual(
        spec.taskConstraints.map((c) => c.name),
        ['name', 'prompt', 'organizationId', 'deliveryEmailAddress', 'scheduleTime', 'model'],
      );
      const problems: string[] = [];
      for (const c of spec.taskConstraints) {
        const p = body.properties?.[c.name];
        const off = (what: string) => problems.push(`${c.name}: ${what}`);
        if (!p) off('missing');
        else {
          if (c.minLength !== undefined && p.minLength !== c.minLength) off(`minLength ${p.minLength}`);
          if (c.maxLength !== undefined && p.maxLength !== c.maxLength) off(`maxLength ${p.maxLength}`);
          if (c.format !== undefined && p.format !== c.format) off(`format ${p.format}`);
          if (c.time24) {
            const re = new RegExp(p.pattern ?? '.*');
            for (const t of ['00:00', '09:05', '23:59']) if (!re.test(t)) off(`refuses ${t}`);
            for (const t of ['24:00', '9:05', '12:60', '12:5', '12:30:00'])
              if (re.test(t)) off(`accepts ${t}`);
          }
        }
      }
      assert.deepEqual(problems, []);
    });

    test("every endpoint of the spec's tables is in the document, with its query, body and uuid path parameters", () => {
      const problems = spec.endpoints.flatMap((e) =>
        NOT_BUILT.has(`${e.method.toUpperCase()} ${e.path}`) && !doc.paths[e.path]?.[e.method]
          ? []
          : endpointProblems(doc, e, spec.resources),
      );
      assert.deepEqual(problems, []);
    });

    test("the source test answer carries the fields the spec's endpoint table gives it", () => {
      const row = spec.endpoints.find((e) => e.path === '/api/svc/sources/{sourceId}/test');
      assert.ok(row, 'the spec lists the source test endpoint');
      const fields = keysOfNote(row.returns);
      assert.deepEqual(
        fields.map((f) => f.name),
        ['message', 'success', 'tools'],
      );
      const schema = schemaAt(doc, one('POST /api/svc/sources/{sourceId}/test', 200));
      assert.ok(schema);
      assert.deepEqual(fieldProblems(doc, schema, fields, 'source test', { resources: spec.resources }), []);
    });
  });

  describe('the checks this test relies on', () => {
    test('the field comparison reports a missing field, a changed enum, a changed requirement, a null and a lost format', () => {
      const broken = structuredClone(schemaAt(doc, one('GET /api/svc/tasks/{taskId}', 200)) ?? {});
      delete broken.properties.userId;
      broken.properties.status.enum = ['active', 'paused'];
      broken.required = [...broken.required.filter((r: string) => r !== 'prompt'), 'timezone'];
      broken.properties.createdAt = { anyOf: [broken.properties.createdAt, { type: 'null' }] };
      broken.properties.skillIds.items = { type: 'string' };
      const fields = spec.resources.get('Task') ?? [];
      assert.deepEqual(fieldProblems(doc, broken, fields, 'Task', { resources: spec.resources }).sort(), [
        'Task.createdAt: allows null, the spec does not',
        'Task.prompt: the spec requires it',
        'Task.skillIds[]: expected string (uuid), got format (none)',
        'Task.status: expected enum active, paused, completed, got enum active, paused',
        'Task.timezone: required, the spec has it optional',
        'Task.userId: missing from the document',
      ]);
    });

    test('the response check refuses an undeclared status, a body off its schema and a body where none is declared', () => {
      const fresh = new ResponseContract(doc);
      const url = `/api/svc/runs/${randomUUID()}`;
      const json = { 'content-type': 'application/json; charset=utf-8' };
      const reply = (status: number, body: unknown) => ({
        status,
        headers: json,
        body,
        raw: JSON.stringify(body),
      });
      assert.throws(() => fresh.check('GET', url, reply(418, {})), /status 418 is not declared/);
      assert.throws(() => fresh.check('GET', url, reply(200, { status: 'done' })), /does not match/);
      assert.throws(() => fresh.check('GET', url, reply(200, { createdAt: 'yesterday' })), /does not match/);
      assert.throws(
        () => fresh.check('GET', url, reply(404, { error: { code: 'not_found' } })),
        /does not match/,
      );
      assert.throws(
        () => fresh.check('DELETE', `/api/svc/tasks/${randomUUID()}`, reply(204, {})),
        /declares no body/,
      );
      fresh.check('GET', url, reply(200, { status: 'pending', createdAt: new Date().toISOString() }));
      assert.deepEqual(
        [...fresh.seen].map(([op, statuses]) => [op, [...statuses]]),
        [
          ['GET /api/svc/runs/{runId}', [418, 200, 404]],
          ['DELETE /api/svc/tasks/{taskId}', [204]],
        ],
      );
    });
  });

  describe('every response of every operation under /api/svc/ against the document', () => {
    const ids = {} as Record<'skill' | 'spareSkill' | 'source' | 'task' | 'destination' | 'model', string>;
    const nobody = randomUUID();

    test('skills answer create, list, read, update, delete and their errors as documented', async () => {
      const full = await expect(201, 'POST', '/api/svc/skills', {
        body: {
          organizationId: org.organizationId,
          name: 'Daily digest',
          content: '# Digest\nKeep it short.',
          category: 'writing',
          description: 'Shapes a digest',
          frontmatter: { author: 'Ops', requiredSources: ['files'], tags: ['digest'] },
          iconUrl: 'https://example.com/skill.png',
          isPublic: true,
          isUserInvocable: false,
          slug: 'daily-digest',
        },
      });
      ids.skill = full.id;
      assert.ok(full.frontmatter && full.iconUrl && full.category, 'the optional fields came back');
      ids.spareSkill = (
        await expect(201, 'POST', '/api/svc/skills', {
          body: { organizationId: org.organizationId, name: 'Spare', content: 'x' },
        })
      ).id;
      const duplicate = {
        organizationId: org.organizationId,
        name: 'Again',
        content: 'x',
        slug: 'daily-digest',
      };
      await expect(409, 'POST', '/api/svc/skills', { body: duplicate });
      await expect(400, 'POST', '/api/svc/skills', {
        body: { organizationId: org.organizationId, name: 'x' },
      });
      await expect(401, 'POST', '/api/svc/skills', {
        body: { ...duplicate, organizationId: other.organizationId },
      });
      await expect(200, 'GET', `/api/svc/skills?${orgQuery()}`);
      await expect(400, 'GET', '/api/svc/skills');
      await expect(200, 'GET', `/api/svc/skills/${ids.skill}`);
      await expect(404, 'GET', `/api/svc/skills/${nobody}`);
      await expect(400, 'GET', '/api/svc/skills/not-a-uuid');
      await expect(200, 'PATCH', `/api/svc/skills/${ids.skill}`, {
        body: { content: 'Shorter.', description: null },
      });
      await expect(404, 'PATCH', `/api/svc/skills/${nobody}`, { body: { name: 'x' } });
      await expect(204, 'DELETE', `/api/svc/skills/${ids.spareSkill}`);
      await expect(404, 'DELETE', `/api/svc/skills/${ids.spareSkill}`);
    });

    test('sources answer create, list, read, update, test, delete and their errors as documented', async () => {
      const stdio = await expect(201, 'POST', '/api/svc/sources', {
        body: {
          organizationId: org.organizationId,
          type: 'mcp',
          name: 'Files',
          config: {
            transport: 'stdio',
            command: 'node',
            args: ['server.js'],
            env: { TOKEN: 'secret-value' },
          },
          authType: 'bearer',
          authConfig: { headerName: 'Authorization', prefix: 'Bearer', provider: 'acme', token: 't0ken' },
          description: 'Reads files',
          iconUrl: 'https://example.com/files.png',
          slug: 'files',
        },
      });
      ids.source = stdio.id;
      const weather = {
        organizationId: org.organizationId,
        type: 'api',
        name: 'Weather',
        config: { baseUrl: 'https://api.example.com' },
      };
      const spare = await expect(201, 'POST', '/api/svc/sources', { body: weather });
      await expect(201, 'POST', '/api/svc/sources', {
        body: {
          ...weather,
          type: 'mcp',
          config: { transport: 'websocket', url: 'wss://mcp.example.com/ws' },
        },
      });
      await expect(409, 'POST', '/api/svc/sources', { body: { ...weather, slug: 'files' } });
      await expect(400, 'POST', '/api/svc/sources', { body: { ...weather, type: 'ftp' } });
      // What the run engine will write: connection time, connector state and tools.
      const tools = [{ name: 'read_file', description: 'Reads a file', inputSchema: { type: 'object' } }];
      await svc.testDb.db.query(
        `UPDATE sources SET last_connected_at = now(), connector_toolkit = 'files', connector_connected = true,
           tools = $2::jsonb WHERE id = $1`,
        [ids.source, JSON.stringify(tools)],
      );
      const read = await expect(200, 'GET', `/api/svc/sources/${ids.source}`);
      assert.deepEqual(read.tools, tools);
      assert.ok(
        read.lastConnectedAt && read.connectorToolkit && read.connectorConnected,
        'optional fields came back',
      );
      await expect(200, 'GET', `/api/svc/sources?${orgQuery()}`);
      await expect(401, 'GET', `/api/svc/sources?organizationId=${other.organizationId}`);
      await expect(404, 'GET', `/api/svc/sources/${nobody}`);
      await expect(200, 'PATCH', `/api/svc/sources/${ids.source}`, {
        body: { isActive: true, description: null, config: read.config, authConfig: read.authConfig },
      });
      await expect(400, 'PATCH', `/api/svc/sources/${ids.source}`, { body: { isActive: 'yes' } });
      await expect(404, 'PATCH', `/api/svc/sources/${nobody}`, { body: { name: 'x' } });
      // The stdio server does not exist: a failed connection is still a 200 with success false.
      const tested = await expect(200, 'POST', `/api/svc/sources/${ids.source}/test`);
      assert.equal(tested.success, false);
      await expect(404, 'POST', `/api/svc/sources/${nobody}/test`);
      // An OAuth source's sign-in: the provider's URL to open; a source with no sign-in is a 409.
      oauthServer = await startOAuthMcpServer();
      const signed = await expect(201, 'POST', '/api/svc/sources', {
        body: {
          ...weather,
          type: 'mcp',
          authType: 'oauth',
          config: { transport: 'http', url: oauthServer.mcpUrl },
        },
      });
      const connect = await expect(200, 'POST', `/api/svc/sources/${signed.id}/connect`);
      assert.ok(connect.url.startsWith(oauthServer.issuer));
      await expect(409, 'POST', `/api/svc/sources/${spare.id}/connect`);
      await expect(404, 'POST', `/api/svc/sources/${nobody}/connect`);
      await expect(204, 'DELETE', `/api/svc/sources/${spare.id}`);
      await expect(404, 'DELETE', `/api/svc/sources/${spare.id}`);
    });

    test("a connector source's sign-in answers its URL, the provider's return redirects, others are refused as documented", async () => {
      const source = await expect(201, 'POST', '/api/svc/sources', {
        body: {
          organizationId: org.organizationId,
          type: 'mcp',
          name: 'GitHub connector',
          config: {},
          authType: 'connector',
          authConfig: { provider: 'github' },
        },
      });
      const { url } = await expect(200, 'POST', `/api/svc/sources/${source.id}/connect`);
      const back = new URL((await connector.signIn(url)).callbackUrl);
      const returned = await api('GET', `${back.pathname}${back.search}`, { key: undefined });
      assert.equal(returned.status, 303, returned.raw);
      await expect(400, 'GET', '/api/svc/connectors/callback?state=forged', { key: undefined });
      await expect(409, 'POST', `/api/svc/sources/${ids.source}/connect`);
      await expect(404, 'POST', `/api/svc/sources/${nobody}/connect`);
      assert.equal((await expect(200, 'GET', `/api/svc/sources/${source.id}`)).connectorConnected, true);
    });

    test('models answer the list, one model, and unknown or malformed ids as documented', async () => {
      const models = await expect(200, 'GET', '/api/svc/models');
      ids.model = models[0].id;
      await expect(200, 'GET', `/api/svc/models/${ids.model}`);
      await expect(404, 'GET', `/api/svc/models/${nobody}`);
      await expect(400, 'GET', '/api/svc/models/gpt');
    });

    test('tasks answer create, list, read and update, expanded or not, and their errors as documented', async () => {
      const body = {
        organizationId: org.organizationId,
        name: 'Morning brief',
        prompt: 'Summarise the news',
        model: ids.model,
        schedule: 'weekly',
        scheduleDays: ['monday', 'friday'],
        scheduleTime: '08:30',
        timezone: 'Europe/Paris',
        deliveryEmail: true,
        deliveryEmailAddress: 'ops@example.com',
        deliverySms: true,
        deliveryPhoneNumber: '+14155550123',
        destinations: [
          { type: 'email', value: 'team@example.com', label: 'Team' },
          { type: 'webhook', value: 'https://hooks.example.com/brief' },
        ],
        skillIds: [ids.skill],
        sourceIds: [ids.source],
      };
      const task = await expect(201, 'POST', '/api/svc/tasks', { body });
      ids.task = task.id;
      ids.destination = task.destinations[0].id;
      await expect(201, 'POST', '/api/svc/tasks', { body: { ...body, cronExpression: '0 7 * * 1-5' } });
      await expect(400, 'POST', '/api/svc/tasks', {
        body: { organizationId: org.organizationId, name: 'No prompt' },
      });
      await expect(401, 'POST', '/api/svc/tasks', {
        body: { ...body, organizationId: other.organizationId },
      });
      await expect(200, 'GET', `/api/svc/tasks?${orgQuery()}`);
      const expanded = await expect(200, 'GET', `/api/svc/tasks?${orgQuery()}&expand=skills,sources`);
      assert.ok(
        expanded[0].skills.length > 0 && expanded[0].sources.length > 0,
        'skills and sources expanded',
      );
      await expect(400, 'GET', `/api/svc/tasks?${orgQuery()}&expand=everything`);
      await expect(200, 'GET', `/api/svc/tasks/${ids.task}?expand=skills,sources`);
      await expect(404, 'GET', `/api/svc/tasks/${nobody}`);
      await expect(200, 'PATCH', `/api/svc/tasks/${ids.task}`, {
        body: { status: 'paused', scheduleTime: null },
      });
      await expect(200, 'PATCH', `/api/svc/tasks/${ids.task}`, { body: { status: 'active' } });
      await expect(400, 'PATCH', `/api/svc/tasks/${ids.task}`, { body: { schedule: 'monthly' } });
      await expect(404, 'PATCH', `/api/svc/tasks/${nobody}`, { body: { name: 'x' } });
    });

    test("a task over the plan's task limit answers 403 on create and on resume", async () => {
      const small = await svc.createOrg('free');
      await admin('PATCH', `/api/admin/organizations/${small.organizationId}`, { tasksLimit: 1 });
      const task = { organizationId: small.organizationId, name: 'One', prompt: 'Hello' };
      const first = await expect(201, 'POST', '/api/svc/tasks', { key: small.apiKey, body: task });
      await expect(403, 'POST', '/api/svc/tasks', { key: small.apiKey, body: task });
      await expect(200, 'PATCH', `/api/svc/tasks/${first.id}`, {
        key: small.apiKey,
        body: { status: 'paused' },
      });
      await expect(201, 'POST', '/api/svc/tasks', { key: small.apiKey, body: task });
      await expect(403, 'PATCH', `/api/svc/tasks/${first.id}`, {
        key: small.apiKey,
        body: { status: 'active' },
      });
    });

    test('destinations answer list, add, change, remove and their errors as documented', async () => {
      const url = `/api/svc/tasks/${ids.task}/destinations`;
      await expect(200, 'GET', url);
      await expect(404, 'GET', `/api/svc/tasks/${nobody}/destinations`);
      const added = await expect(201, 'POST', url, {
        body: { type: 'sms', value: '+14155550124', label: 'On call' },
      });
      await expect(400, 'POST', url, { body: { type: 'fax', value: '123' } });
      await expect(200, 'PATCH', `${url}/${ids.destination}`, { body: { label: null } });
      await expect(404, 'PATCH', `${url}/${nobody}`, { body: { label: 'x' } });
      await expect(204, 'DELETE', `${url}/${added.id}`);
      await expect(404, 'DELETE', `${url}/${added.id}`);
      const many = Array.from({ length: 20 }, (_, i) => ({ type: 'email', value: `r${i}@example.com` }));
      const full = await expect(201, 'POST', '/api/svc/tasks', {
        body: { organizationId: org.organizationId, name: 'Many', prompt: 'Hi', destinations: many },
      });
      await expect(409, 'POST', `/api/svc/tasks/${full.id}/destinations`, {
        body: { type: 'email', value: 'one-more@example.com' },
      });
    });

    test('runs, pending, running, completed and failed, answer as documented from every run endpoint', async () => {
      const runNow = () => expect(202, 'POST', `/api/svc/tasks/${ids.task}/run`);
      const db = svc.testDb.db;
      const finish = async (id: string, status: 'completed' | 'failed') => {
        await db.query(
          `UPDATE runs SET status = $2, delivery_status = $3, output = $4, error = $5, cost_cents = 1.25,
             tokens_used = 321, duration_ms = 1500, started_at = now(), completed_at = now() WHERE id = $1`,
          [
            id,
            status,
            status === 'completed' ? 'delivered' : 'failed',
            status === 'completed' ? 'Hello' : null,
            status === 'failed' ? 'model timed out' : null,
          ],
        );
        await recordRunOutcome(db, id, { status, costCents: 1.25, tokensUsed: 321 });
      };
      const completedId: string = (await runNow()).id;
      await expect(409, 'POST', `/api/svc/tasks/${ids.task}/run`);
      await finish(completedId, 'completed');
      const failedId: string = (await runNow()).id;
      await finish(failedId, 'failed');
      const runningId: string = (await runNow()).id;
      await db.query(`UPDATE runs SET status = 'running', started_at = now() WHERE id = $1`, [runningId]);
      await expect(404, 'POST', `/api/svc/tasks/${nobody}/run`);
      await expect(400, 'POST', '/api/svc/tasks/nope/run');

      const completed = await expect(200, 'GET', `/api/svc/runs/${completedId}`);
      for (const key of ['output', 'durationMs', 'deliveryStatus', 'startedAt', 'completedAt']) {
        assert.ok(key in completed, `the completed run carries ${key}`);
      }
      assert.equal((await expect(200, 'GET', `/api/svc/runs/${failedId}`)).error, 'model timed out');
      assert.equal((await expect(200, 'GET', `/api/svc/runs/${runningId}`)).status, 'running');
      await expect(404, 'GET', `/api/svc/runs/${nobody}`);
      // Redelivery: nothing failed yet is a 409; a failed delivery goes back in the queue.
      await expect(409, 'POST', `/api/svc/runs/${completedId}/redeliver`);
      await db.query(
        `INSERT INTO deliveries (id, organization_id, run_id, channel, target, position, status, attempts,
                                 round_attempts, last_error, created_at, updated_at)
         VALUES (gen_random_uuid(), $1, $2, 'webhook', 'https://example.com/hook', 0, 'failed', 8, 8, 'HTTP 500', now(), now())`,
        [org.organizationId, failedId],
      );
      const redelivered = await expect(202, 'POST', `/api/svc/runs/${failedId}/redeliver`);
      assert.equal(redelivered.deliveryStatus, 'pending');
      assert.equal(redelivered.deliveries[0].status, 'pending');
      await expect(200, 'GET', `/api/svc/runs/${failedId}`);
      await expect(404, 'POST', `/api/svc/runs/${nobody}/redeliver`);
      assert.equal((await expect(200, 'GET', `/api/svc/runs?${orgQuery()}`)).length, 3);
      await expect(200, 'GET', `/api/svc/runs?${orgQuery()}&limit=2`);
      await expect(400, 'GET', `/api/svc/runs?${orgQuery()}&limit=101`);
      await expect(200, 'GET', `/api/svc/tasks/${ids.task}/runs?limit=100`);
      await expect(400, 'GET', `/api/svc/tasks/${ids.task}/runs?limit=0`);
      await expect(404, 'GET', `/api/svc/tasks/${nobody}/runs`);
      // Cancel: the running run ends failed at once; a second cancel finds it ended.
      assert.match((await expect(202, 'POST', `/api/svc/runs/${runningId}/cancel`)).error, /^Canceled/);
      await expect(409, 'POST', `/api/svc/runs/${runningId}/cancel`);
      await expect(404, 'POST', `/api/svc/runs/${nobody}/cancel`);
    });

    test('statistics and billing status answer as documented, and refuse a missing or foreign organization', async () => {
      const stats = await expect(200, 'GET', `/api/svc/stats?${orgQuery()}`);
      assert.equal(stats.totalRuns, 3);
      await expect(400, 'GET', '/api/svc/stats');
      await expect(401, 'GET', `/api/svc/stats?organizationId=${other.organizationId}`);
      const billing = await expect(200, 'GET', `/api/svc/billing/status?${orgQuery()}`);
      assert.equal(billing.plan, 'paid');
      await expect(400, 'GET', '/api/svc/billing/status?organizationId=42');
      await expect(401, 'GET', `/api/svc/billing/status?organizationId=${other.organizationId}`);
      const body = { organizationId: org.organizationId };
      await expect(409, 'POST', '/api/svc/billing/portal', { body });
      assert.match((await expect(200, 'POST', '/api/svc/billing/checkout', { body })).url, /^https:/);
      assert.match((await expect(200, 'POST', '/api/svc/billing/portal', { body })).url, /^https:/);
      await expect(401, 'POST', '/api/svc/billing/checkout', {
        body: { organizationId: other.organizationId },
      });
      await expect(400, 'POST', '/api/svc/billing/checkout', { body: {} });
      const payload = JSON.stringify({
        id: 'evt_contract',
        object: 'event',
        type: 'customer.created',
        created: Math.floor(Date.now() / 1000),
        data: { object: { id: 'cus_contract', object: 'customer' } },
      });
      const headers = { 'content-type': 'application/json' };
      await expect(400, 'POST', '/api/svc/billing/webhook', { body: payload, headers, key: undefined });
      const signature = Stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET });
      const received = await expect(200, 'POST', '/api/svc/billing/webhook', {
        body: payload,
        headers: { ...headers, 'stripe-signature': signature },
        key: undefined,
      });
      assert.equal(received.received, true);
    });

    test('slot records, upcoming slots and the schedule preview answer as documented', async () => {
      assert.ok(Array.isArray(await expect(200, 'GET', `/api/svc/tasks/${ids.task}/slots?limit=5`)));
      await expect(400, 'GET', `/api/svc/tasks/${ids.task}/slots?limit=101`);
      await expect(404, 'GET', `/api/svc/tasks/${nobody}/slots`);
      assert.ok(Array.isArray(await expect(200, 'GET', `/api/svc/tasks/${ids.task}/upcoming?count=3`)));
      await expect(404, 'GET', `/api/svc/tasks/${nobody}/upcoming`);
      const body = {
        organizationId: org.organizationId,
        schedule: 'daily',
        timezone: 'Europe/Berlin',
        count: 2,
      };
      assert.equal((await expect(200, 'POST', '/api/svc/schedules/preview', { body })).length, 2);
      await expect(400, 'POST', '/api/svc/schedules/preview', {
        body: { ...body, timezone: 'Nowhere/Else' },
      });
      await expect(401, 'POST', '/api/svc/schedules/preview', {
        body: { ...body, organizationId: other.organizationId },
      });
    });

    test('deleting a task answers 204 with no body, then 404', async () => {
      // Replay (after the statistics above counted three runs): a new pending run of the task.
      const [latest] = await expect(200, 'GET', `/api/svc/tasks/${ids.task}/runs?limit=1`);
      await expect(400, 'POST', `/api/svc/runs/${latest.id}/replay`, { body: { model: 'no/such-model' } });
      const replay = await expect(202, 'POST', `/api/svc/runs/${latest.id}/replay`, { body: {} });
      assert.equal(replay.replayOf, latest.id);
      await expect(409, 'POST', `/api/svc/runs/${latest.id}/replay`);
      await expect(404, 'POST', `/api/svc/runs/${nobody}/replay`);
      await expect(204, 'DELETE', `/api/svc/tasks/${ids.task}`);
      await expect(404, 'DELETE', `/api/svc/tasks/${ids.task}`);
      await expect(400, 'DELETE', '/api/svc/tasks/nope');
    });

    test('a body of another media type answers 415 and an oversized body 413, as declared, on routes without a body too', async () => {
      const headers = { 'content-type': 'application/xml' };
      await expect(415, 'POST', '/api/svc/tasks', { body: '<task/>', headers });
      await expect(415, 'PATCH', `/api/svc/skills/${ids.skill}`, { body: '<skill/>', headers });
      await expect(415, 'POST', `/api/svc/sources/${ids.source}/test`, { body: '<test/>', headers });
      await expect(415, 'DELETE', `/api/svc/skills/${ids.skill}`, { body: '<skill/>', headers });
      const huge = { organizationId: org.organizationId, name: 'Big', prompt: 'x'.repeat(1_100_000) };
      await expect(413, 'POST', '/api/svc/tasks', { body: huge });
      await expect(413, 'POST', `/api/svc/tasks/${nobody}/run`, { body: huge });
      await expect(400, 'POST', `/api/svc/tasks/${nobody}/run`, {
        body: '{"not json',
        headers: { 'content-type': 'application/json' },
      });
    });

    test('every operation but the document, the Stripe webhook and the connector callback requires a key, and answers 401 without one in the declared envelope', async () => {
      const isPublic = (op: string) => {
        const { method, path } = split(op);
        const security = doc.paths[path]?.[method].security ?? doc.security;
        return !security?.some((s: Record<string, unknown>) => 'apiKey' in s);
      };
      const ops = operationsUnder(doc, '/api/svc/');
      // Stripe's webhook is signed instead, and the connector callback carries a sealed state.
      assert.deepEqual(ops.filter(isPublic), [
        'GET /api/svc/openapi.json',
        'GET /api/svc/connectors/callback',
        'POST /api/svc/billing/webhook',
      ]);
      for (const op of ops.filter((o) => !isPublic(o))) {
        const { method, path } = split(op);
        const url = path.replace(/\{\w+\}/g, () => randomUUID());
        const res = await api(method.toUpperCase() as CallOptions['method'], url, {
          key: undefined,
          remoteAddress: '192.0.2.44',
        });
        assert.equal(res.status, 401, `${op}: ${res.raw}`);
        assert.deepEqual(res.body, {
          error: { code: 'unauthorized', message: 'Invalid or missing API key' },
        });
      }
    });

    test('an organization over its rate limit gets 429 in the declared envelope', async () => {
      const limited = await svc.createOrg('free');
      await admin('PATCH', `/api/admin/organizations/${limited.organizationId}`, { rateLimitPerMinute: 1 });
      const statuses: number[] = [];
      // Three calls: at least two fall in one window, even across a minute boundary.
      for (let i = 0; i < 3; i++)
        statuses.push((await api('GET', '/api/svc/models', { key: limited.apiKey })).status);
      assert.ok(statuses.includes(429), `statuses ${statuses}`);
    });

    test('the MCP endpoint answers a JSON-RPC message, and refuses GET and DELETE with a 405 that allows POST', async () => {
      const headers = { accept: 'application/json, text/event-stream' };
      const listed = await expect(200, 'POST', '/api/svc/mcp', {
        body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        headers,
      });
      assert.ok(listed.result.tools.length > 10);
      // Not operations of the document: the API's 405 for a known path with another method.
      for (const method of ['GET', 'DELETE'] as const) {
        const res = await svc.call({ method, url: '/api/svc/mcp', key: org.apiKey });
        assertEnvelope(res, 405, 'method_not_allowed');
        assert.equal(res.headers.allow, 'POST');
      }
    });

    test('every operation under /api/svc/ in the document answered above with a success (or 501, not implemented; the callback a redirect)', () => {
      // The 401 and 429 rounds reach every operation; they do not count as its contract check.
      // The connector callback's success is its redirect to the dashboard.
      const success = (op: string, s: number) =>
        s < 300 || s === 501 || (op === 'GET /api/svc/connectors/callback' && s === 303);
      const answered = (op: string) => [...(contract.seen.get(op) ?? [])].some((s) => success(op, s));
      const missing = operationsUnder(doc, '/api/svc/').filter((op) => !answered(op));
      assert.deepEqual(missing, []);
    });
  });
});
