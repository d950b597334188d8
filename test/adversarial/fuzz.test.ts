// Property-based fuzzing of every operation under /api/svc/ and /api/admin/ of the service's own
// OpenAPI document. Requests are generated from each operation's schemas and then corrupted on
// purpose: wrong types, missing and extra fields, 100 kB+ and 1 MiB+ strings, astral, RTL, NUL
// and lone-surrogate text, edge numbers (-0, 1e308, 1e309, 2^53+1, NaN), huge arrays, malformed
// ids in the path, bad query parameters, wrong content types, invalid, truncated and empty JSON
// bodies, bad keys. Ids of resources that exist are used too, so requests reach the handlers.
//
// Every answer must be: below 500; a status the document declares for the operation; for an
// error, the one envelope `{ "error": { "code", "message", "details"? } }` with the code that
// belongs to the status (a validation error naming what failed in `details`); for a success, a
// body that matches the document; with X-Request-Id, and the rate-limit headers under /api/svc/.
// A wrong credential is refused (401) before anything else is looked at. No request may hang,
// and afterwards ordinary requests still work and nothing was logged at error level.
//
// Environment (all optional):
//   FUZZ_SEED  base seed (default 20260214). Each operation's seed is derived from it and the
//              operation's name, so an operation gets the same requests whatever FUZZ_ONLY selects.
//   FUZZ_RUNS  requests per operation (default 100; 4,200 requests in all).
//   FUZZ_ONLY  only the operations whose "METHOD /path" contains this text, e.g.
//              FUZZ_ONLY='PATCH /api/svc/tasks/{taskId}'.
// A failure names the operation, its seed and fast-check's shrunk counterexample, and prints the
// FUZZ_SEED and FUZZ_ONLY that replay it (state left by earlier operations, such as a deleted
// fixture, is only the same when the whole file runs with the same FUZZ_SEED).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import Stripe from 'stripe';
import { generateApiKey } from '../../src/domain/api-key-format.ts';
import { sealCallbackState } from '../../src/domain/connectors.ts';
import { ERROR_STATUS } from '../../src/lib/errors.ts';
import { deref, type OpenApiDocument, ResponseContract, type Schema } from '../helpers/openapi-contract.ts';
import { ADMIN_TOKEN, startTestService, type TestService } from '../helpers/service.ts';
import { type StripeTestServer, startStripeServer } from '../helpers/stripe-server.ts';
import {
  Encoded,
  type GenContext,
  HOSTILE_QUERY_TAILS,
  HOSTILE_QUERY_VALUES,
  HOSTILE_SEGMENTS,
  hostileValue,
  type Json,
  mutate,
  Ref,
  toJsonText,
  validValue,
} from './fuzz-helpers.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20260214);
const RUNS = Number(process.env.FUZZ_RUNS ?? 100);
const ONLY = process.env.FUZZ_ONLY ?? '';
/** A request not answered within this time fails the property: the service must never hang. */
const HANG_LIMIT_MS = 30_000;
const WEBHOOK_SECRET = 'whsec_fuzz_0123456789abcdef';

/* ------------------------------------------------------------------------------------------- */
/* The requests.                                                                                */

interface Operation {
  method: string;
  path: string;
  /** "METHOD /path". */
  name: string;
  spec: any;
  /** How the operation is authenticated. */
  area: 'svc' | 'admin' | 'public';
}

/** The Authorization header sent: the right credential, or one of many wrong ones. */
type AuthVariant =
  | 'valid'
  | 'none'
  | 'empty'
  | 'basic'
  | 'garbage'
  | 'bad-checksum'
  | 'unknown-key'
  | 'huge'
  | 'two-keys'
  | 'cross'
  | 'other-org'
  | 'lowercase-scheme'
  | 'double-space';

/** Wrong credentials: the answer must be 401 (or 429 for the per-address limit of 401s). */
const REFUSED_AUTH = new Set<AuthVariant>([
  'none',
  'empty',
  'basic',
  'garbage',
  'bad-checksum',
  'unknown-key',
  'huge',
  'two-keys',
  'cross',
]);

type Body =
  | { kind: 'none' }
  /** JSON made from a value; `truncate` cuts the text to that fraction; `sign` is for Stripe's webhook. */
  | { kind: 'json'; value: Json; contentType: string; truncate?: number; sign?: 'valid' | 'bad' | 'none' }
  | { kind: 'text'; text: string; contentType: string | null }
  | { kind: 'bytes'; bytes: number[]; contentType: string };

interface FuzzRequest {
  auth: AuthVariant;
  /** Requests with a bad key come from many client addresses (401s are counted per address). */
  client: number;
  path: Record<string, Ref | Encoded>;
  query: [string, Json | Encoded][];
  queryTail: string;
  body: Body;
}

const JSON_TYPE_VARIANTS = [
  'application/json; charset=utf-8',
  'application/json;charset=UTF-8',
  'APPLICATION/JSON',
  'Application/Json; Charset=utf-8',
  'application/json; charset=iso-8859-1',
  'application/json; charset=utf-16',
  'application/json; foo=bar',
  'application/json ;charset=utf-8',
];

const OTHER_TYPES: (string | null)[] = [
  null,
  '',
  'text/plain',
  'text/plain; charset=utf-8',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/xml',
  'application/octet-stream',
  '*/*',
  'application/jsonp',
  'application/vnd.api+json',
  'application/merge-patch+json',
  'application/json-seq',
  'text/json',
  'application/json, text/plain',
  'json',
];

const RAW_BODIES = [
  '',
  ' ',
  '\n',
  '{',
  '}',
  '{"a":',
  'null',
  '[]',
  '"x"',
  '42',
  'true',
  '{"name":"x",}',
  "{'name':'x'}",
  '\uFEFF{}',
  '{"a":1}{"b":2}',
  '{"__proto__":{"polluted":1}}',
  '{"constructor":{"prototype":{"polluted":1}}}',
  '{"a":"\\ud800"}',
  '{"a":"\\u0000"}',
  '{"name":"a","name":1}',
  'NaN',
  '\u0000',
  'undefined',
  '['.repeat(10_000),
  '{"a":'.repeat(5000),
  `${'['.repeat(5000)}${']'.repeat(5000)}`,
];

const RAW_BYTES = [
  [0xff, 0xfe, 0x7b, 0x7d],
  [0xc0, 0x80],
  [0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d],
  [0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d],
  [0x00, 0x00, 0x00, 0x7b],
];

/** The fixtures a path parameter of the operation is drawn from (refs by name, see `fixtures`). */
function idPool(op: Operation, param: string): string[] {
  const del = op.method === 'DELETE';
  switch (param) {
    case 'taskId':
      return del && op.path === '/api/svc/tasks/{taskId}' ? ['taskDel', 'otherTask'] : ['task', 'otherTask'];
    case 'destinationId':
      return del ? ['destDel', 'otherDest'] : ['dest', 'otherDest'];
    case 'runId':
      return ['run', 'otherRun'];
    case 'skillId':
      return del ? ['skillDel', 'otherSkill'] : ['skill', 'otherSkill'];
    case 'sourceId':
      // Only sources that no request of the fuzzer can point elsewhere are connected to: a
      // local one (no network) and an mcp one on a loopback address (refused before dialling).
      if (op.path.endsWith('/test')) return ['sourceLocal', 'sourceMcp', 'otherSource'];
      return del ? ['sourceDel', 'otherSource'] : ['sourcePatch', 'otherSource'];
    case 'modelId':
      return ['model', 'model2'];
    case 'id':
      return op.method === 'GET' ? ['org', 'victimOrg', 'otherOrg'] : ['victimOrg'];
    case 'keyId':
      return ['victimKey', 'victimKey2'];
    default:
      throw new Error(`no fixtures for the path parameter ${param} of ${op.name}`);
  }
}

const pathValue = (pool: string[]): fc.Arbitrary<Ref | Encoded> =>
  fc.oneof(
    { weight: 7, arbitrary: fc.constantFrom(...pool).map((n) => new Ref(n)) },
    { weight: 1, arbitrary: fc.constantFrom(...pool).map((n) => new Ref(n, true)) },
    { weight: 1, arbitrary: fc.uuid().map((u) => new Encoded(u)) },
    { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_SEGMENTS) },
  );

const authArb = (area: Operation['area']): fc.Arbitrary<AuthVariant> =>
  area === 'public'
    ? fc.constant('valid')
    : fc.oneof(
        { weight: 30, arbitrary: fc.constant<AuthVariant>('valid') },
        {
          weight: 4,
          arbitrary: fc.constantFrom<AuthVariant>(
            'none',
            'empty',
            'basic',
            'garbage',
            'bad-checksum',
            'unknown-key',
            'huge',
            'two-keys',
            'cross',
            'other-org',
            'lowercase-scheme',
            'double-space',
          ),
        },
      );

function queryArb(ctx: GenContext, op: Operation): fc.Arbitrary<[string, Json | Encoded][]> {
  const params: any[] = (op.spec.parameters ?? []).filter((p: any) => p.in === 'query');
  const entries = params.map((p) => {
    const valid: fc.Arbitrary<Json> =
      p.name === 'organizationId'
        ? fc.constantFrom(new Ref('org'), new Ref('org'), new Ref('org', true))
        : // A connector callback's state is sealed by the service: no generated value is one.
          p.name === 'state' && op.path === '/api/svc/connectors/callback'
          ? fc.constantFrom(new Ref('connectorState'), new Ref('otherConnectorState'))
          : validValue(ctx, p.schema);
    return fc.oneof(
      { weight: 8, arbitrary: valid.map((v): [string, Json | Encoded][] => [[p.name, v]]) },
      { weight: 1, arbitrary: fc.constant<[string, Json | Encoded][]>([]) },
      {
        weight: 2,
        arbitrary: fc
          .constantFrom<Json | Encoded>(...HOSTILE_QUERY_VALUES, new Ref('otherOrg'))
          .map((v): [string, Json | Encoded][] => [[p.name, v]]),
      },
      {
        weight: 1,
        arbitrary: fc.tuple(valid, valid).map(([a, b]): [string, Json | Encoded][] => [
          [p.name, a],
          [p.name, b],
        ]),
      },
    );
  });
  return fc.tuple(...entries).map((parts) => parts.flat());
}

function bodyArb(ctx: GenContext, op: Operation): fc.Arbitrary<Body> {
  const schema: Schema | undefined = deref(
    ctx.doc,
    deref(ctx.doc, op.spec.requestBody)?.content?.['application/json']?.schema,
  );
  const jsonType = fc.oneof(
    { weight: 12, arbitrary: fc.constant('application/json') },
    { weight: 1, arbitrary: fc.constantFrom(...JSON_TYPE_VARIANTS) },
  );
  const json = (value: fc.Arbitrary<Json>) =>
    fc.tuple(value, jsonType).map(([v, contentType]): Body => ({ kind: 'json', value: v, contentType }));
  const rawText = fc.constantFrom(...RAW_BODIES).map(
    (text): Body => ({
      kind: 'text',
      text,
      contentType: 'application/json',
    }),
  );
  const bytes = fc.constantFrom(...RAW_BYTES).map(
    (b): Body => ({
      kind: 'bytes',
      bytes: b,
      contentType: 'application/json',
    }),
  );
  const otherType = (value: fc.Arbitrary<Json>) =>
    fc.tuple(value, fc.constantFrom(...OTHER_TYPES)).map(
      ([v, contentType]): Body => ({
        kind: 'text',
        text: JSON.stringify(v instanceof Ref ? v.name : v) ?? 'null',
        contentType,
      }),
    );

  if (op.path === '/api/svc/billing/webhook') {
    const event = stripeEventArb(ctx);
    const signed =
      (sign: 'valid' | 'bad' | 'none') =>
      (value: Json): Body => ({
        kind: 'json',
        value,
        contentType: 'application/json',
        sign,
      });
    return fc.oneof(
      { weight: 4, arbitrary: event.map(signed('valid')) },
      { weight: 6, arbitrary: event.chain((e) => mutate(ctx, undefined, e)).map(signed('valid')) },
      { weight: 1, arbitrary: event.map(signed('bad')) },
      { weight: 1, arbitrary: event.map(signed('none')) },
      { weight: 1, arbitrary: rawText },
      { weight: 1, arbitrary: otherType(fc.constant({})) },
    );
  }

  if (!schema) {
    return fc.oneof(
      { weight: 12, arbitrary: fc.constant<Body>({ kind: 'none' }) },
      { weight: 1, arbitrary: json(fc.oneof(fc.constant<Json>({}), hostileValue)) },
      { weight: 1, arbitrary: rawText },
      { weight: 1, arbitrary: otherType(fc.constant({})) },
    );
  }
  const valid = validValue(ctx, schema);
  return fc.oneof(
    { weight: 4, arbitrary: json(valid) },
    { weight: 9, arbitrary: json(valid.chain((v) => mutate(ctx, schema, v))) },
    { weight: 1, arbitrary: json(hostileValue) },
    { weight: 2, arbitrary: rawText },
    {
      weight: 1,
      arbitrary: fc
        .tuple(valid, fc.double({ min: 0, max: 0.99, noNaN: true }))
        .map(
          ([value, truncate]): Body => ({ kind: 'json', value, contentType: 'application/json', truncate }),
        ),
    },
    { weight: 1, arbitrary: bytes },
    { weight: 1, arbitrary: otherType(valid) },
    { weight: 1, arbitrary: fc.constant<Body>({ kind: 'none' }) },
  );
}

/** Stripe events of the kinds the service handles (and one it does not), about fixtures or not. */
function stripeEventArb(_ctx: GenContext): fc.Arbitrary<Json> {
  const claim = fc.constantFrom<Json>(
    new Ref('victimOrg'),
    new Ref('victimOrg', true),
    new Ref('otherOrg'),
    '00000000-0000-0000-0000-000000000000',
    'not-a-uuid',
  );
  const when = fc.integer({ min: 1_600_000_000, max: 2_000_000_000 });
  const object = fc.record(
    {
      id: fc.constantFrom('sub_fuzz_1', 'cs_fuzz_1', 'in_fuzz_1'),
      object: fc.constantFrom('subscription', 'checkout.session', 'invoice'),
      customer: fc.oneof(
        fc.constantFrom<Json>('cus_fuzz_victim', 'cus_unknown', null),
        fc.record({ id: fc.constant('cus_fuzz_victim') }),
      ),
      status: fc.constantFrom('active', 'trialing', 'past_due', 'canceled', 'incomplete', 'unpaid'),
      metadata: fc.record({ organizationId: claim }, { requiredKeys: [] }),
      client_reference_id: claim,
      period_end: when,
      lines: fc.record({
        data: fc.array(fc.record({ period: fc.record({ start: when, end: when }) }), { maxLength: 2 }),
      }),
    },
    { requiredKeys: ['id', 'object'] },
  );
  return fc.record({
    id: fc.stringMatching(/^evt_[A-Za-z0-9]{6,12}$/),
    object: fc.constant('event'),
    api_version: fc.constant('2025-01-27.acacia'),
    type: fc.constantFrom(
      'customer.subscription.created',
      'customer.subscription.updated',
      'customer.subscription.deleted',
      'customer.subscription.paused',
      'customer.subscription.resumed',
      'invoice.paid',
      'checkout.session.completed',
      'charge.refunded',
    ),
    created: when,
    livemode: fc.boolean(),
    data: fc.record({ object }),
  }) as fc.Arbitrary<Json>;
}

function requestArb(ctx: GenContext, op: Operation): fc.Arbitrary<FuzzRequest> {
  const params = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string);
  const path = fc.record(Object.fromEntries(params.map((p) => [p, pathValue(idPool(op, p))])));
  return fc.record({
    auth: authArb(op.area),
    client: fc.integer({ min: 1, max: 250 }),
    path,
    query: queryArb(ctx, op),
    queryTail: fc.oneof(
      { weight: 8, arbitrary: fc.constant('') },
      { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_QUERY_TAILS) },
    ),
    body: bodyArb(ctx, op),
  });
}

/* ------------------------------------------------------------------------------------------- */
/* The checks.                                                                                  */

const CODES = ERROR_STATUS as Record<string, number>;

/** The one error envelope, with the code of its status, and nothing a client should not see. */
function assertErrorEnvelope(where: string, res: LightMyRequestResponse): void {
  assert.match(String(res.headers['content-type']), /^application\/json/, `${where}: JSON content type`);
  let body: any;
  try {
    body = JSON.parse(res.body);
  } catch {
    assert.fail(`${where}: the error body is not JSON: ${res.body.slice(0, 500)}`);
  }
  assert.deepEqual(
    Object.keys(body ?? {}),
    ['error'],
    `${where}: only the envelope: ${res.body.slice(0, 500)}`,
  );
  const error = body.error;
  for (const key of Object.keys(error)) {
    assert.ok(['code', 'message', 'details'].includes(key), `${where}: unexpected error field ${key}`);
  }
  assert.equal(
    CODES[error.code],
    res.statusCode,
    `${where}: code ${error.code} is not the code of the status`,
  );
  assert.equal(typeof error.message, 'string', `${where}: a message`);
  assert.ok(error.message.length > 0, `${where}: a non-empty message`);
  assert.ok(!/\bat .+\.[cm]?[jt]s:\d+/.test(res.body), `${where}: no stack trace: ${res.body.slice(0, 500)}`);
  if (error.code === 'validation_error') {
    assert.ok(
      Array.isArray(error.details) && error.details.length > 0,
      `${where}: a validation error says what failed in details: ${res.body.slice(0, 500)}`,
    );
  }
  if (error.details !== undefined) {
    assert.ok(Array.isArray(error.details), `${where}: details is an array`);
    for (const d of error.details) {
      assert.deepEqual(Object.keys(d).sort(), ['message', 'path'], `${where}: a detail is { path, message }`);
      assert.match(
        d.path,
        /^\/(body|query|path|headers)(\/|$)/,
        `${where}: a detail path names the request part`,
      );
      assert.equal(typeof d.message, 'string', `${where}: a detail message`);
    }
  }
  if (res.statusCode === 429) assert.ok(res.headers['retry-after'], `${where}: Retry-After on a 429`);
}

/** Path segments that URL parsing removes or rewrites: the request reaches another route. */
const NORMALISED_SEGMENTS = new Set(['', '.', '..', '%2e%2e']);

/* ------------------------------------------------------------------------------------------- */

describe('fuzzing every operation of the OpenAPI document', () => {
  let stripe: StripeTestServer;
  let svc: TestService;
  let doc: OpenApiDocument;
  let contract: ResponseContract;
  /** Fixture name to value: ids of resources that exist, keys. */
  const fixtures: Record<string, string> = {};
  const resolve = (ref: Ref) => {
    const value = fixtures[ref.name];
    if (value === undefined) throw new Error(`no fixture ${ref.name}`);
    return ref.upper ? value.toUpperCase() : value;
  };

  before(async () => {
    stripe = await startStripeServer();
    svc = await startTestService({
      env: {
        SVC_ROLE: 'api',
        STRIPE_SECRET_KEY: 'sk_test_fuzz_0123456789',
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        STRIPE_PRICE_ID: 'price_fuzz_monthly',
        SVC_STRIPE_API_BASE: stripe.url,
      },
    });
    const res = await svc.call({ method: 'GET', url: '/api/svc/openapi.json' });
    assert.equal(res.status, 200, res.raw);
    doc = res.body;
    contract = new ResponseContract(doc);

    const made = async (
      status: number,
      options: Parameters<TestService['call']>[0],
    ): Promise<Record<string, any>> => {
      const reply = await svc.call(options);
      assert.equal(reply.status, status, `${options.method} ${options.url}: ${reply.raw}`);
      return reply.body;
    };
    const org = await svc.createOrg('paid');
    const other = await svc.createOrg('free');
    const victim = await svc.createOrg('free');
    // The fuzzer sends thousands of requests a minute; the plan limits are not under test here.
    for (const o of [org, other]) {
      await made(200, {
        method: 'PATCH',
        url: `/api/admin/organizations/${o.organizationId}`,
        admin: true,
        body: { rateLimitPerMinute: 1_000_000, tasksLimit: 1_000_000, runsLimit: 'unlimited' },
      });
    }
    Object.assign(fixtures, {
      org: org.organizationId,
      otherOrg: other.organizationId,
      victimOrg: victim.organizationId,
      key: org.apiKey,
      otherKey: other.apiKey,
      unknownKey: generateApiKey(),
    });
    const create = async (o: typeof org, resource: string, body: Record<string, unknown>) =>
      (
        await made(201, {
          method: 'POST',
          url: `/api/svc/${resource}`,
          key: o.apiKey,
          body: { organizationId: o.organizationId, ...body },
        })
      ).id as string;

    const models = (await made(200, { method: 'GET', url: '/api/svc/models', key: org.apiKey })) as any[];
    fixtures.model = models[0]?.id;
    fixtures.model2 = models.at(-1)?.id;
    fixtures.modelRouter = models[0]?.routerModelId;

    fixtures.skill = await create(org, 'skills', { name: 'Fuzz skill', content: '# Be brief' });
    fixtures.skillDel = await create(org, 'skills', { name: 'Doomed skill', content: 'x' });
    fixtures.otherSkill = await create(other, 'skills', { name: 'Other skill', content: 'x' });
    fixtures.sourcePatch = await create(org, 'sources', {
      name: 'Patched source',
      type: 'mcp',
      config: { transport: 'http', url: 'http://127.0.0.1:9/mcp' },
      authType: 'bearer',
      authConfig: { token: 'fuzz-secret-token' },
    });
    fixtures.sourceLocal = await create(org, 'sources', { name: 'Local tools', type: 'local', config: {} });
    fixtures.sourceMcp = await create(org, 'sources', {
      name: 'Loopback MCP',
      type: 'mcp',
      config: { url: 'http://127.0.0.1:9/mcp' },
    });
    fixtures.sourceDel = await create(org, 'sources', { name: 'Doomed source', type: 'local', config: {} });
    fixtures.connectorState = sealCallbackState(svc.service.deps, {
      id: fixtures.sourcePatch,
      organization_id: org.organizationId,
    });
    fixtures.otherSource = await create(other, 'sources', { name: 'Other', type: 'local', config: {} });
    fixtures.otherConnectorState = sealCallbackState(svc.service.deps, {
      id: fixtures.otherSource,
      organization_id: other.organizationId,
    });
    const taskBody = {
      name: 'Fuzz task',
      prompt: 'Say hello',
      schedule: 'daily',
      scheduleTime: '09:00',
      skillIds: [fixtures.skill],
      sourceIds: [fixtures.sourceLocal],
      destinations: [
        { type: 'email', value: 'ops@example.com' },
        { type: 'sms', value: '+14155550123', label: 'On call' },
      ],
    };
    fixtures.task = await create(org, 'tasks', taskBody);
    fixtures.taskDel = await create(org, 'tasks', { name: 'Doomed task', prompt: 'x' });
    fixtures.otherTask = await create(other, 'tasks', { ...taskBody, skillIds: [], sourceIds: [] });
    const destinations = async (o: typeof org, taskId: string) =>
      (await made(200, {
        method: 'GET',
        url: `/api/svc/tasks/${taskId}/destinations`,
        key: o.apiKey,
      })) as unknown as { id: string }[];
    const [dest, destDel] = await destinations(org, fixtures.task);
    fixtures.dest = dest?.id as string;
    fixtures.destDel = destDel?.id as string;
    fixtures.otherDest = (await destinations(other, fixtures.otherTask))[0]?.id as string;
    const run = async (o: typeof org, taskId: string) =>
      (await made(202, { method: 'POST', url: `/api/svc/tasks/${taskId}/run`, key: o.apiKey })).id as string;
    fixtures.run = await run(org, fixtures.task);
    fixtures.otherRun = await run(other, fixtures.otherTask);
    for (const name of ['victimKey', 'victimKey2']) {
      fixtures[name] = (
        await made(201, {
          method: 'POST',
          url: `/api/admin/organizations/${victim.organizationId}/keys`,
          admin: true,
          body: { name },
        })
      ).id;
    }
    for (const [name, value] of Object.entries(fixtures)) assert.ok(value, `fixture ${name} is set`);
  });

  after(async () => {
    await svc?.close();
    await stripe?.close();
  });

  function context(): GenContext {
    const ref = (name: string, weight = 1) => ({ weight, arbitrary: fc.constant<Json>(new Ref(name)) });
    const uuid = { weight: 1, arbitrary: fc.uuid() as fc.Arbitrary<Json> };
    /** Mostly values the service accepts, sometimes ones it must refuse. */
    const mostly = (good: Json[], bad: Json[]) =>
      fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom(...good) },
        { weight: 1, arbitrary: fc.constantFrom(...bad) },
      );
    const emails = mostly(
      ['ops@example.com', 'first.last+tag@sub.example.org'],
      ['a@b', 'x@[127.0.0.1]', '@'],
    );
    const phones = mostly(['+14155550123', '+4930123456'], ['+999999999999999', '+0123456789', '0800123456']);
    const webhooks = mostly(
      ['https://example.com/hook'],
      ['http://127.0.0.1:9/hook', 'ftp://example.com/', 'hook'],
    );
    const label = fc.constantFrom<Json>('On call', '😀 ops', 'שלום');
    const destination = fc.oneof(
      fc.record({ type: fc.constant('email'), value: emails, label }, { requiredKeys: ['type', 'value'] }),
      fc.record({ type: fc.constant('sms'), value: phones, label }, { requiredKeys: ['type', 'value'] }),
      fc.record(
        { type: fc.constant('webhook'), value: webhooks, label },
        { requiredKeys: ['type', 'value'] },
      ),
    ) as fc.Arbitrary<Json>;
    return {
      doc,
      // A destination's value must fit its type: generate the two together.
      shape: (schema) =>
        schema.properties?.value && schema.properties?.type?.enum?.includes('webhook')
          ? destination
          : undefined,
      hints: {
        organizationId: fc.oneof(ref('org', 12), ref('otherOrg'), uuid, {
          weight: 1,
          arbitrary: fc.constant(new Ref('org', true)),
        }),
        model: fc.oneof(ref('model', 3), ref('modelRouter', 3), ref('model2', 2), {
          weight: 1,
          arbitrary: fc.constant<Json>('no-such-model'),
        }),
        timezone: mostly(
          [
            'UTC',
            'Europe/Berlin',
            'America/New_York',
            'Asia/Kathmandu',
            'Pacific/Chatham',
            'Pacific/Kiritimati',
          ],
          ['Etc/GMT+12', 'utc', 'Not/A_Zone', '+05:30', 'EST5EDT', 'local'],
        ),
        cronExpression: mostly(
          [
            '0 9 * * 1-5',
            '*/15 * * * *',
            '59 23 31 12 *',
            '0 0 29 2 *',
            '0 0 30 2 *',
            '0 0 31 4 *',
            '0 0 31 2 1',
          ],
          [
            '* * * * * *',
            '60 * * * *',
            '0 0 * * 8',
            '0 0 L * *',
            '0 0 ? * MON#5',
            '@daily and more',
            '0 0 1 1 * 2099',
            '*/0 * * * *',
            '0-59/1000000 * * * *',
          ],
        ),
        'skillIds[]': fc.oneof(ref('skill', 6), ref('skillDel'), ref('otherSkill'), uuid),
        'sourceIds[]': fc.oneof(ref('sourceLocal', 4), ref('sourcePatch', 2), ref('otherSource'), uuid),
        'destinations[]': destination,
        deliveryEmailAddress: emails,
        deliveryPhoneNumber: phones,
        url: mostly(
          ['http://127.0.0.1:9/mcp', 'https://example.com/mcp'],
          ['ws://127.0.0.1:9/', 'http://user:pass@example.com/', 'javascript:alert(1)'],
        ),
        baseUrl: mostly(['http://127.0.0.1:9/', 'https://api.example.com'], ['ftp://example.com/']),
        openapiUrl: mostly(['http://127.0.0.1:9/openapi.json'], ['file:///etc/passwd']),
        command: fc.constantFrom('node', 'npx', '/bin/sh', 'rm'),
        'env{}': fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/),
        email: fc.oneof(
          { weight: 4, arbitrary: fc.emailAddress().filter((e) => e.length <= 200) },
          { weight: 1, arbitrary: fc.constantFrom(' Admin@Example.COM ', 'a@b', '@') },
        ),
        expiresAt: mostly(
          ['2099-01-01T00:00:00Z', '2099-12-31T23:59:59.999+14:00'],
          ['2000-01-01T00:00:00Z'],
        ),
      },
    };
  }

  async function send(
    op: Operation,
    req: FuzzRequest,
  ): Promise<{ url: string; res: LightMyRequestResponse }> {
    const encodeValue = (v: Json | Encoded) =>
      v instanceof Encoded ? v.text : encodeURIComponent(v instanceof Ref ? resolve(v) : String(v));
    const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) =>
      encodeValue(req.path[name] as Ref | Encoded),
    );
    const query = req.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeValue(v)}`).join('&');
    const search = query || req.queryTail ? `?${query}${req.queryTail}` : '';
    const url = `${path}${search}`;

    const headers: Record<string, string> = {};
    const key = fixtures.key as string;
    const own = op.area === 'admin' ? ADMIN_TOKEN : key;
    const authorization: Record<AuthVariant, string | undefined> = {
      valid: `Bearer ${own}`,
      none: undefined,
      empty: 'Bearer ',
      basic: 'Basic dXNlcjpwYXNz',
      garbage: 'Bearer not-a-key',
      'bad-checksum': `Bearer ${own.slice(0, -1)}${own.endsWith('A') ? 'B' : 'A'}`,
      'unknown-key': `Bearer ${fixtures.unknownKey}`,
      huge: `Bearer ${'a'.repeat(10_000)}`,
      'two-keys': `Bearer ${own} ${own}`,
      cross: `Bearer ${op.area === 'admin' ? key : ADMIN_TOKEN}`,
      'other-org': `Bearer ${fixtures.otherKey}`,
      'lowercase-scheme': `bearer ${own}`,
      'double-space': `Bearer  ${own}`,
    };
    const auth = op.area === 'public' ? undefined : authorization[req.auth];
    if (auth !== undefined) headers.authorization = auth;

    let payload: string | Buffer | undefined;
    const body = req.body;
    if (body.kind === 'json') {
      let text = toJsonText(body.value, resolve);
      if (body.truncate !== undefined) text = text.slice(0, Math.floor(text.length * body.truncate));
      payload = text;
      headers['content-type'] = body.contentType;
      if (body.sign === 'valid') {
        headers['stripe-signature'] = Stripe.webhooks.generateTestHeaderString({
          payload: text,
          secret: WEBHOOK_SECRET,
        });
      } else if (body.sign === 'bad') {
        headers['stripe-signature'] = `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}`;
      }
    } else if (body.kind === 'text') {
      payload = body.text;
      if (body.contentType !== null) headers['content-type'] = body.contentType;
    } else if (body.kind === 'bytes') {
      payload = Buffer.from(body.bytes);
      headers['content-type'] = body.contentType;
    }
    const res = await svc.app.inject({
      method: op.method as 'GET',
      url,
      headers,
      ...(payload !== undefined && { payload }),
      ...(req.auth !== 'valid' && { remoteAddress: `127.0.${req.client}.${(req.client * 7) % 250}` }),
    });
    return { url, res };
  }

  function check(op: Operation, req: FuzzRequest, url: string, res: LightMyRequestResponse): void {
    const status = res.statusCode;
    const where = `${op.name} (auth ${req.auth}): ${op.method} ${url.slice(0, 300)} -> ${status}`;
    assert.ok(status < 500, `${where}: a server error: ${res.body.slice(0, 1000)}`);
    assert.ok(res.headers['x-request-id'], `${where}: X-Request-Id`);
    if (op.area === 'svc') {
      for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
        assert.ok(res.headers[h] !== undefined, `${where}: ${h} on every answer under /api/svc/`);
      }
    }
    if (status >= 400) assertErrorEnvelope(where, res);
    if (REFUSED_AUTH.has(req.auth) && op.area !== 'public') {
      assert.ok(
        status === 401 || (op.area === 'svc' && status === 429),
        `${where}: a wrong credential is refused before anything else: ${res.body.slice(0, 300)}`,
      );
    }
    // The answer is the operation's (status declared, body as documented) unless URL parsing sent
    // the request elsewhere (dot segments, empty ids).
    const rerouted = Object.values(req.path).some(
      (v) => v instanceof Encoded && NORMALISED_SEGMENTS.has(v.text),
    );
    if (rerouted) return;
    let body: unknown;
    try {
      body = res.body ? JSON.parse(res.body) : undefined;
    } catch {
      body = undefined;
    }
    contract.check(op.method, url, { status, headers: res.headers, body, raw: res.body });
  }

  test('every operation answers every generated request without a 5xx, in the envelope, as documented', async (t) => {
    const ops: Operation[] = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/api/svc/') || path.startsWith('/api/admin/'))
      .flatMap(([path, item]) =>
        Object.entries<any>(item).map(([method, spec]) => ({
          method: method.toUpperCase(),
          path,
          name: `${method.toUpperCase()} ${path}`,
          spec,
          area: (Array.isArray(spec.security) && spec.security.length === 0
            ? 'public'
            : path.startsWith('/api/admin/')
              ? 'admin'
              : 'svc') as Operation['area'],
        })),
      )
      .filter((op) => op.name.includes(ONLY));
    assert.ok(ops.length > 0, `no operation matches FUZZ_ONLY=${ONLY}`);
    const ctx = context();
    let total = 0;
    for (const op of ops) {
      const statuses = new Map<number, number>();
      // The operation's own seed: the same requests whichever operations run before it.
      let hash = 2166136261;
      for (const c of op.name) hash = Math.imul(hash ^ c.charCodeAt(0), 16777619);
      const seed = (SEED ^ hash) | 0;
      await t.test(op.name, async () => {
        const property = fc.asyncProperty(requestArb(ctx, op), async (req) => {
          const { url, res } = await send(op, req);
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
          total++;
          check(op, req, url, res);
        });
        try {
          await fc.assert(property, {
            seed,
            numRuns: RUNS,
            timeout: HANG_LIMIT_MS,
            includeErrorInReport: true,
          });
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          throw new Error(`${op.name}: replay with FUZZ_SEED=${SEED} FUZZ_ONLY='${op.name}'\n${message}`);
        }
        const seen = [...statuses].sort(([a], [b]) => a - b);
        t.diagnostic(`${op.name}: ${seen.map(([s, n]) => `${s}x${n}`).join(' ')}`);
        if (RUNS >= 50) {
          // Some requests got past authentication, parsing and validation into the handler.
          assert.ok(
            seen.some(([s]) => ![400, 401, 413, 415, 429].includes(s)),
            `${op.name}: no request reached the handler (${seen.map(([s]) => s).join(', ')})`,
          );
        }
      });
    }
    t.diagnostic(`${total} requests over ${ops.length} operations (FUZZ_SEED=${SEED}, FUZZ_RUNS=${RUNS})`);
  });

  test('the service is healthy afterwards: normal requests still work', async () => {
    assert.equal((await svc.call({ method: 'GET', url: '/healthz' })).status, 200);
    assert.equal((await svc.call({ method: 'GET', url: '/readyz' })).status, 200);
    const key = fixtures.key as string;
    const created = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key,
      body: { organizationId: fixtures.org, name: 'After the storm', prompt: 'Still here?' },
    });
    assert.equal(created.status, 201, created.raw);
    const fetched = await svc.call({ method: 'GET', url: `/api/svc/tasks/${created.body.id}`, key });
    assert.equal(fetched.status, 200, fetched.raw);
    assert.equal(fetched.body.name, 'After the storm');
    const list = await svc.call({ method: 'GET', url: `/api/svc/tasks?organizationId=${fixtures.org}`, key });
    assert.equal(list.status, 200, list.raw);
    assert.ok(list.body.some((task: { id: string }) => task.id === created.body.id));
    const admin = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${fixtures.org}`,
      admin: true,
    });
    assert.equal(admin.status, 200, admin.raw);
    // No request failed inside the service: nothing was logged at error level.
    const failures = svc.logs.filter((line) => line.includes('"level":50'));
    assert.deepEqual(failures.slice(0, 3), [], 'no error-level log lines');
  });
});
