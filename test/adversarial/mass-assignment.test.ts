import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, test } from 'node:test';
import type { TSchema } from 'typebox';
import { BillingSessionBody, BillingStatus } from '../../src/schemas/billing.ts';
import { Skill, SkillCreateBody, SkillUpdateBody } from '../../src/schemas/skill.ts';
import { Source, SourceCreateBody, SourceUpdateBody } from '../../src/schemas/source.ts';
import {
  Destination,
  DestinationInput,
  DestinationPatch,
  Task,
  TaskCreateBody,
  TaskUpdateBody,
} from '../../src/schemas/task.ts';
import { assertEnvelope, assertValidation } from '../helpers/assertions.ts';
import { type Org, resourceCalls, useTestService } from '../helpers/fixtures.ts';
import type { CallOptions, Reply } from '../helpers/service.ts';

/**
 * Mass assignment: a client sends the fields the service owns (ids, owners, timestamps,
 * counters, plan and limits, run results, discovered tools) alongside a legitimate write.
 * The API documentation says request bodies are strict: an unknown field is a 400
 * `validation_error` naming it, and the whole request is refused (the legitimate part is not
 * applied either). Writes that take no body ignore one. Every refusal is checked through the
 * API and in the database, where nothing may have moved.
 *
 * Complements test/validation.test.ts (one unknown field per operation) and
 * test/isolation.test.ts (other organizations' ids in paths and lists).
 */

const PAST = '2001-02-03T04:05:06.000Z';
const PLANTED_TOOL = 'planted_tool';

/** Fields the service owns, beyond the ones each resource's own schema shows (derived below). */
const SERVER_FIELDS = [
  'id',
  'organizationId',
  'createdAt',
  'updatedAt',
  'status',
  'version',
  'lastRunAt',
  'nextRunAt',
  'tools',
  'isActive',
  'lastConnectedAt',
  'connectorConnected',
  'userId',
  'taskId',
  'plan',
  'runsUsed',
  'runsLimit',
  'tasksLimit',
  'usersLimit',
  'rateLimitPerMinute',
  'limits',
  'usageCreditsCents',
  'paymentCustomerId',
  'paymentSubscriptionId',
  'costCents',
  'tokensUsed',
  'durationMs',
  'output',
  'error',
  'deliveryStatus',
  'webhookSecret',
  'keyHash',
  // Storage spellings and case variants must not reach a column either.
  'organization_id',
  'created_at',
  'next_run_at',
  'is_active',
  'runs_used',
  'OrganizationId',
  'organizationID',
];

/** A plausible value for each field, so that a refusal can only be about the field itself. */
function plantedValue(
  field: string,
  theirs: { organizationId: string; id: string; taskId: string },
): unknown {
  const values: Record<string, unknown> = {
    id: theirs.id,
    organizationId: theirs.organizationId,
    organization_id: theirs.organizationId,
    OrganizationId: theirs.organizationId,
    organizationID: theirs.organizationId,
    taskId: theirs.taskId,
    createdAt: PAST,
    updatedAt: PAST,
    created_at: PAST,
    lastRunAt: PAST,
    nextRunAt: PAST,
    next_run_at: PAST,
    lastConnectedAt: PAST,
    billingPeriodStart: PAST,
    status: 'completed',
    version: 99,
    tools: [{ name: PLANTED_TOOL, description: 'Planted', inputSchema: { type: 'object' } }],
    isActive: true,
    is_active: true,
    connectorConnected: true,
    connectorToolkit: 'planted',
    userId: 'planted-user',
    plan: 'paid',
    runsUsed: 0,
    runs_used: 0,
    runsLimit: null,
    tasksLimit: 1000,
    tasksCount: 0,
    usersLimit: 1000,
    usersCount: 0,
    rateLimitPerMinute: 100_000,
    limits: { rateLimitPerMinute: 100_000, runsLimit: null },
    usageCostCents: 0,
    usageCreditsCents: 1_000_000,
    paymentCustomerId: 'cus_planted',
    paymentSubscriptionId: 'sub_planted',
    costCents: 0,
    tokensUsed: 0,
    durationMs: 0,
    output: 'planted',
    error: 'planted',
    deliveryStatus: 'delivered',
    webhookSecret: 'whsec_planted',
    keyHash: '0'.repeat(64),
    skills: [{ id: theirs.id, name: 'Planted', content: 'Planted' }],
    sources: [{ id: theirs.id, name: 'Planted', type: 'local', config: {} }],
    slug: 'planted-slug',
    type: 'api',
    iconUrl: 'https://example.com/planted.png',
  };
  return field in values ? values[field] : 'planted';
}

const keysOf = (schema: TSchema) => Object.keys((schema as unknown as { properties: object }).properties);

/** What a client may not set in this write: the resource's fields the body lacks, and the service's own. */
function refusedFields(resource: TSchema, body: TSchema): string[] {
  const accepted = new Set(keysOf(body));
  return [...new Set([...keysOf(resource), ...SERVER_FIELDS])].filter((f) => !accepted.has(f)).sort();
}

interface DataSet {
  taskId: string;
  destinationId: string;
  skillId: string;
  sourceId: string;
}

describe('mass assignment of fields the service owns', () => {
  // api role only: nothing but these requests changes the data. Many requests: the two
  // organizations' rate limits are raised out of the way (the billing test uses its own).
  const fx = useTestService({
    orgs: ['free', 'free'],
    env: { SVC_ROLE: 'api', STRIPE_WEBHOOK_SECRET: 'whsec_bWFzcy1hc3NpZ25tZW50LXRlc3Q=' },
    rateLimitPerMinute: 100_000,
  });
  const tasks = resourceCalls(fx, 'tasks');
  const skills = resourceCalls(fx, 'skills');
  const sources = resourceCalls(fx, 'sources');
  let a: DataSet;
  let b: DataSet;

  const call = (o: Pick<Org, 'apiKey'>, options: Omit<CallOptions, 'key'>) =>
    fx.svc.call({ ...options, key: o.apiKey });
  const created = (res: Reply, status = 201) => {
    assert.equal(res.status, status, res.raw);
    return res.body.id as string;
  };

  async function seed(o: Org): Promise<DataSet> {
    const skillId = created(await skills.create(o, { name: 'Playbook', content: 'Be thorough.' }));
    const sourceId = created(await sources.create(o, { type: 'local', name: 'Clock', config: {} }));
    const task = await tasks.create(o, {
      name: 'Morning brief',
      prompt: 'Summarise the news',
      schedule: 'daily',
      scheduleTime: '07:00',
      skillIds: [skillId],
      sourceIds: [sourceId],
      destinations: [{ type: 'email', value: 'ops@example.com', label: 'Ops' }],
    });
    return { taskId: created(task), destinationId: task.body.destinations[0].id, skillId, sourceId };
  }

  /** Every row a write could touch, in every organization (a key's last use aside). */
  async function dbState(): Promise<Record<string, string[]>> {
    const state: Record<string, string[]> = {};
    for (const table of [
      'organizations',
      'api_keys',
      'tasks',
      'task_destinations',
      'task_skills',
      'task_sources',
      'skills',
      'sources',
      'runs',
      'usage_ledger',
    ]) {
      const rows = await fx.db.query<Record<string, unknown>>(`SELECT * FROM ${table}`);
      state[table] = rows
        .map(({ last_used_at: _lastUse, ...row }) => JSON.stringify(row))
        .sort((x, y) => x.localeCompare(y));
    }
    return state;
  }

  /** The answers of GETs, raw, to compare before and after. */
  async function read(o: Org, urls: string[]): Promise<string[]> {
    const out = [];
    for (const url of urls) {
      const res = await call(o, { method: 'GET', url });
      assert.equal(res.status, 200, `${url}: ${res.raw}`);
      out.push(`${url} ${res.raw}`);
    }
    return out;
  }

  before(async () => {
    a = await seed(fx.org);
    b = await seed(fx.other);
  });

  interface WriteOp {
    route: string;
    /** The resource the write makes or changes, and the body schema the write takes. */
    resource: TSchema;
    body: TSchema;
    /** A valid request with these extra fields. */
    send: (extra: Record<string, unknown>) => Promise<Reply>;
    /** What the key's organization reads back of the resource. */
    urls: () => string[];
    /** The other organization's id of the same kind of resource. */
    theirId: () => string;
  }

  const A = () => fx.org;
  const list = (resource: string) => `/api/svc/${resource}?organizationId=${A().organizationId}`;
  const WRITES: WriteOp[] = [
    {
      route: 'POST /api/svc/tasks',
      resource: Task,
      body: TaskCreateBody,
      send: (extra) => tasks.create(A(), { name: 'Planted', prompt: 'Planted', ...extra }),
      urls: () => [list('tasks')],
      theirId: () => b.taskId,
    },
    {
      route: 'PATCH /api/svc/tasks/:taskId',
      resource: Task,
      body: TaskUpdateBody,
      send: (extra) => tasks.patch(A(), a.taskId, { name: 'Renamed', ...extra }),
      urls: () => [`/api/svc/tasks/${a.taskId}?expand=skills,sources`, `/api/svc/tasks/${a.taskId}/runs`],
      theirId: () => b.taskId,
    },
    {
      route: 'POST /api/svc/tasks/:taskId/destinations',
      resource: Destination,
      body: DestinationInput,
      send: (extra) =>
        call(A(), {
          method: 'POST',
          url: `/api/svc/tasks/${a.taskId}/destinations`,
          body: { type: 'email', value: 'planted@example.com', ...extra },
        }),
      urls: () => [`/api/svc/tasks/${a.taskId}/destinations`],
      theirId: () => b.destinationId,
    },
    {
      route: 'PATCH /api/svc/tasks/:taskId/destinations/:destinationId',
      resource: Destination,
      body: DestinationPatch,
      send: (extra) =>
        call(A(), {
          method: 'PATCH',
          url: `/api/svc/tasks/${a.taskId}/destinations/${a.destinationId}`,
          body: { label: 'Renamed', ...extra },
        }),
      urls: () => [`/api/svc/tasks/${a.taskId}/destinations`],
      theirId: () => b.destinationId,
    },
    {
      route: 'POST /api/svc/skills',
      resource: Skill,
      body: SkillCreateBody,
      send: (extra) => skills.create(A(), { name: 'Planted', content: 'Planted', ...extra }),
      urls: () => [list('skills')],
      theirId: () => b.skillId,
    },
    {
      route: 'PATCH /api/svc/skills/:skillId',
      resource: Skill,
      body: SkillUpdateBody,
      send: (extra) => skills.patch(A(), a.skillId, { content: 'Changed content', ...extra }),
      urls: () => [`/api/svc/skills/${a.skillId}`],
      theirId: () => b.skillId,
    },
    {
      route: 'POST /api/svc/sources',
      resource: Source,
      body: SourceCreateBody,
      send: (extra) => sources.create(A(), { name: 'Planted', type: 'local', config: {}, ...extra }),
      urls: () => [list('sources')],
      theirId: () => b.sourceId,
    },
    {
      route: 'PATCH /api/svc/sources/:sourceId',
      resource: Source,
      body: SourceUpdateBody,
      send: (extra) => sources.patch(A(), a.sourceId, { name: 'Renamed', ...extra }),
      urls: () => [`/api/svc/sources/${a.sourceId}`],
      theirId: () => b.sourceId,
    },
    ...(['checkout', 'portal'] as const).map(
      (kind): WriteOp => ({
        route: `POST /api/svc/billing/${kind}`,
        resource: BillingStatus,
        body: BillingSessionBody,
        send: (extra) =>
          call(A(), {
            method: 'POST',
            url: `/api/svc/billing/${kind}`,
            body: { organizationId: A().organizationId, ...extra },
          }),
        urls: () => [list('billing/status'), list('stats')],
        theirId: () => fx.other.organizationId,
      }),
    ),
  ];

  for (const op of WRITES) {
    test(`${op.route}: every field the service owns is refused with a 400 naming it, and nothing changes`, async (t) => {
      const fields = refusedFields(op.resource, op.body);
      assert.ok(fields.includes('id') && fields.includes('createdAt'), fields.join(', '));
      const answersBefore = await read(A(), op.urls());
      const rowsBefore = await dbState();
      const theirs = { organizationId: fx.other.organizationId, id: op.theirId(), taskId: b.taskId };
      for (const field of fields) {
        await t.test(field, async () => {
          const res = await op.send({ [field]: plantedValue(field, theirs) });
          assertValidation(res, `/body/${field}`);
          assert.match(
            res.body.error.details.find((d: { path: string }) => d.path === `/body/${field}`).message,
            /not a known field/,
          );
          assert.deepEqual(await read(A(), op.urls()), answersBefore, 'the API reads the same');
          assert.deepEqual(await dbState(), rowsBefore, 'the database holds the same rows');
        });
      }
    });
  }

  test('nested objects refuse the fields the service owns too: destinations, config, authConfig, frontmatter', async () => {
    const theirTask = b.taskId;
    const cases: [string, () => Promise<Reply>, string][] = [
      [
        "a task's destination with the other organization's destination id",
        () =>
          tasks.create(A(), {
            name: 'Planted',
            prompt: 'x',
            destinations: [{ type: 'email', value: 'x@example.com', id: b.destinationId }],
          }),
        '/body/destinations/0/id',
      ],
      [
        "a task's destination naming the other organization's task",
        () =>
          tasks.patch(A(), a.taskId, {
            destinations: [{ type: 'email', value: 'x@example.com', taskId: theirTask }],
          }),
        '/body/destinations/0/taskId',
      ],
      [
        "a replacement destination list keeping a destination's id",
        () =>
          tasks.patch(A(), a.taskId, {
            destinations: [{ type: 'email', value: 'moved@example.com', id: a.destinationId }],
          }),
        '/body/destinations/0/id',
      ],
      [
        'a destination moved to the other organization’s task',
        () =>
          call(A(), {
            method: 'PATCH',
            url: `/api/svc/tasks/${a.taskId}/destinations/${a.destinationId}`,
            body: { taskId: theirTask },
          }),
        '/body/taskId',
      ],
      [
        'a source config naming the other organization',
        () =>
          sources.create(A(), {
            name: 'Planted',
            type: 'local',
            config: { organizationId: fx.other.organizationId },
          }),
        '/body/config/organizationId',
      ],
      [
        'a source config carrying tools',
        () => sources.patch(A(), a.sourceId, { config: { tools: [{ name: PLANTED_TOOL }] } }),
        '/body/config/tools',
      ],
      [
        'a source authConfig naming the other organization',
        () =>
          sources.patch(A(), a.sourceId, {
            authType: 'bearer',
            authConfig: { token: 't', organizationId: fx.other.organizationId },
          }),
        '/body/authConfig/organizationId',
      ],
      [
        'a skill frontmatter carrying a version',
        () => skills.create(A(), { name: 'Planted', content: 'x', frontmatter: { version: 99 } }),
        '/body/frontmatter/version',
      ],
      [
        'a skill frontmatter naming the other organization',
        () => skills.patch(A(), a.skillId, { frontmatter: { organizationId: fx.other.organizationId } }),
        '/body/frontmatter/organizationId',
      ],
    ];
    const before = await dbState();
    for (const [what, send, path] of cases) {
      const res = await send();
      assert.equal(res.status, 400, `${what}: ${res.raw}`);
      assertValidation(res, path);
      assert.deepEqual(await dbState(), before, `${what} changed nothing`);
    }
  });

  test('a duplicated organizationId key is checked and stored as one value: the last, as JSON says', async () => {
    const A_ = A().organizationId;
    const B_ = fx.other.organizationId;
    const bodies: Record<string, string> = {
      tasks: '"name":"Duplicate","prompt":"x"',
      skills: '"name":"Duplicate","content":"x"',
      sources: '"name":"Duplicate","type":"local","config":{}',
    };
    for (const [resource, fields] of Object.entries(bodies)) {
      const send = (first: string, last: string) =>
        call(A(), {
          method: 'POST',
          url: `/api/svc/${resource}`,
          headers: { 'content-type': 'application/json' },
          body: `{"organizationId":"${first}",${fields},"organizationId":"${last}"}`,
        });
      const before = await dbState();
      assertEnvelope(await send(A_, B_), 401, 'unauthorized');
      assert.deepEqual(await dbState(), before, `${resource}: nothing created under either organization`);

      const res = await send(B_, A_);
      const id = created(res);
      assert.equal(res.body.organizationId, A_);
      const rows = await fx.db.query<{ organization_id: string }>(
        `SELECT organization_id FROM ${resource} WHERE id = $1`,
        [id],
      );
      assert.deepEqual(
        rows.map((r) => r.organization_id),
        [A_],
        `${resource}: stored under the key's organization`,
      );
      assert.equal((await call(A(), { method: 'DELETE', url: `/api/svc/${resource}/${id}` })).status, 204);
    }
  });

  test('__proto__ and constructor keys are refused and pollute nothing', async () => {
    const polluting = [
      `"__proto__":{"organizationId":"${fx.other.organizationId}","plan":"paid","isAdmin":true}`,
      '"constructor":{"prototype":{"plan":"paid","isAdmin":true}}',
    ];
    const creates: Record<string, string> = {
      '/api/svc/tasks': `"organizationId":"${A().organizationId}","name":"P","prompt":"x"`,
      '/api/svc/skills': `"organizationId":"${A().organizationId}","name":"P","content":"x"`,
      '/api/svc/sources': `"organizationId":"${A().organizationId}","name":"P","type":"local","config":{}`,
      [`/api/svc/tasks/${a.taskId}`]: '"name":"P"',
      [`/api/svc/tasks/${a.taskId}/destinations`]: '"type":"email","value":"p@example.com"',
      [`/api/svc/skills/${a.skillId}`]: '"name":"P"',
      [`/api/svc/sources/${a.sourceId}`]: '"name":"P"',
    };
    const before = await dbState();
    for (const [url, fields] of Object.entries(creates)) {
      const method = /\/[0-9a-f-]{36}$/.test(url) ? 'PATCH' : 'POST';
      for (const key of polluting) {
        const res = await call(A(), {
          method,
          url,
          headers: { 'content-type': 'application/json' },
          body: `{${fields},${key}}`,
        });
        assertEnvelope(res, 400, 'validation_error');
      }
    }
    assert.deepEqual(await dbState(), before);
    const probe: Record<string, unknown> = {};
    assert.equal(probe.plan, undefined, 'Object.prototype is untouched');
    assert.equal(probe.isAdmin, undefined, 'Object.prototype is untouched');
  });

  test('query strings and headers carry no server fields: a foreign organizationId is a 401, anything else is ignored', async () => {
    const before = await dbState();
    const foreign = `organizationId=${fx.other.organizationId}`;
    for (const [method, url, body] of [
      ['POST', `/api/svc/tasks?${foreign}`, { organizationId: A().organizationId, name: 'P', prompt: 'x' }],
      ['PATCH', `/api/svc/tasks/${a.taskId}?${foreign}`, { name: 'P' }],
      ['POST', `/api/svc/skills?${foreign}`, { organizationId: A().organizationId, name: 'P', content: 'x' }],
      ['PATCH', `/api/svc/sources/${a.sourceId}?${foreign}`, { name: 'P' }],
    ] as const) {
      assertEnvelope(await call(A(), { method, url, body }), 401, 'unauthorized');
    }
    assert.deepEqual(await dbState(), before);

    const plantedId = randomUUID();
    const headers = {
      'x-organization-id': fx.other.organizationId,
      'x-plan': 'paid',
      'x-ratelimit-limit': '100000',
      'x-user-id': 'planted-user',
    };
    const query = `id=${plantedId}&plan=paid&status=completed&createdAt=${PAST}&userId=planted-user`;
    const res = await call(A(), {
      method: 'POST',
      url: `/api/svc/tasks?${query}`,
      headers,
      body: { organizationId: A().organizationId, name: 'Query planted', prompt: 'x' },
    });
    const id = created(res);
    assert.notEqual(id, plantedId);
    assert.equal(res.body.status, 'active');
    assert.equal(res.body.organizationId, A().organizationId);
    assert.notEqual(res.body.createdAt, PAST);
    assert.equal(res.body.userId, undefined);
    const [row] = await fx.db.query<Record<string, unknown>>('SELECT * FROM tasks WHERE id = $1', [id]);
    assert.equal(row?.organization_id, A().organizationId);
    assert.equal(row?.status, 'active');
    assert.equal(row?.user_id, null);
    assert.equal((await fx.db.query('SELECT 1 FROM tasks WHERE id = $1', [plantedId])).length, 0);

    const task = (await tasks.get(A(), a.taskId)).body;
    const patched = await call(A(), {
      method: 'PATCH',
      url: `/api/svc/tasks/${a.taskId}?status=completed&nextRunAt=${PAST}`,
      headers,
      body: { name: task.name },
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.equal(patched.body.status, task.status);
    assert.equal(patched.body.nextRunAt, task.nextRunAt);
    assert.equal((await call(A(), { method: 'DELETE', url: `/api/svc/tasks/${id}` })).status, 204);
  });

  test('writes that take no body ignore one: a run cannot be born completed, a test cannot plant tools', async () => {
    // With a foreign organizationId the body is still checked against the key (401, no run).
    const runsBefore = await fx.db.query('SELECT * FROM runs');
    assertEnvelope(
      await call(A(), {
        method: 'POST',
        url: `/api/svc/tasks/${a.taskId}/run`,
        body: { organizationId: fx.other.organizationId },
      }),
      401,
      'unauthorized',
    );
    assert.deepEqual(await fx.db.query('SELECT * FROM runs'), runsBefore);

    const run = await call(A(), {
      method: 'POST',
      url: `/api/svc/tasks/${a.taskId}/run`,
      body: {
        id: randomUUID(),
        taskId: b.taskId,
        status: 'completed',
        deliveryStatus: 'delivered',
        output: 'planted',
        costCents: -500,
        tokensUsed: 1_000_000,
        completedAt: PAST,
      },
    });
    const runId = created(run, 202);
    assert.equal(run.body.status, 'pending');
    assert.equal(run.body.taskId, a.taskId);
    assert.equal(run.body.output, undefined);
    const [row] = await fx.db.query<Record<string, unknown>>('SELECT * FROM runs WHERE id = $1', [runId]);
    assert.equal(row?.organization_id, A().organizationId);
    assert.equal(row?.task_id, a.taskId);
    assert.equal(row?.status, 'pending');
    assert.equal(row?.output, null);
    assert.equal(row?.delivery_status, null);
    assert.equal(Number(row?.cost_cents), 0);
    assert.equal(row?.tokens_used, 0);
    assert.equal(row?.completed_at, null);

    const runBefore = await fx.db.query('SELECT * FROM runs WHERE id = $1', [runId]);
    assertEnvelope(
      await call(A(), {
        method: 'POST',
        url: `/api/svc/runs/${runId}/redeliver`,
        body: { deliveryStatus: 'delivered', status: 'completed' },
      }),
      409,
      'conflict',
    );
    assert.deepEqual(await fx.db.query('SELECT * FROM runs WHERE id = $1', [runId]), runBefore);

    const tested = await call(A(), {
      method: 'POST',
      url: `/api/svc/sources/${a.sourceId}/test`,
      body: { success: true, tools: [{ name: PLANTED_TOOL }], isActive: false, lastConnectedAt: PAST },
    });
    assert.equal(tested.status, 200, tested.raw);
    const names = (tools: { name: string }[]) => tools.map((x) => x.name).sort();
    assert.ok(!names(tested.body.tools).includes(PLANTED_TOOL));
    const source = (await sources.get(A(), a.sourceId)).body;
    assert.deepEqual(names(source.tools), names(tested.body.tools));
    assert.equal(source.isActive, true);
    assert.notEqual(source.lastConnectedAt, PAST);
    const [stored] = await fx.db.query<{ tools: unknown }>('SELECT tools FROM sources WHERE id = $1', [
      a.sourceId,
    ]);
    assert.ok(!JSON.stringify(stored?.tools).includes(PLANTED_TOOL), 'the planted tool is not stored');
  });

  test('a public skill is shared with no other organization: not listed, not readable, not attachable', async () => {
    const id = created(await skills.create(A(), { name: 'Shared?', content: 'x', isPublic: true }));
    const B = fx.other;
    assertEnvelope(await skills.get(B, id), 404, 'not_found');
    assert.ok(!(await skills.list(B)).raw.includes(id));
    assertValidation(
      await tasks.create(B, { name: 'Borrow', prompt: 'x', skillIds: [id] }),
      '/body/skillIds/0',
    );
    assertValidation(await tasks.patch(B, b.taskId, { skillIds: [id] }), '/body/skillIds/0');
    assert.equal((await call(A(), { method: 'DELETE', url: `/api/svc/skills/${id}` })).status, 204);
  });

  test("a key cannot change its organization's plan or limits through any route", async () => {
    // An organization of its own, with the free plan's limits untouched (no operator override).
    const org = await fx.svc.createOrg('free');
    const status = () =>
      call(org, { method: 'GET', url: `/api/svc/billing/status?organizationId=${org.organizationId}` });
    const orgRow = async () =>
      JSON.stringify(await fx.db.query('SELECT * FROM organizations WHERE id = $1', [org.organizationId]));
    const keyRows = async () =>
      (
        await fx.db.query<{ id: string }>('SELECT id FROM api_keys WHERE organization_id = $1', [
          org.organizationId,
        ])
      ).map((r) => r.id);
    const initial = await status();
    assert.equal(initial.status, 200, initial.raw);
    assert.equal(initial.body.plan, 'free');
    assert.equal(initial.headers['x-ratelimit-limit'], '60');
    const rowBefore = await orgRow();
    const keysBefore = await keyRows();

    const upgrade = {
      organizationId: org.organizationId,
      plan: 'paid',
      rateLimitPerMinute: 100_000,
      tasksLimit: 1000,
      runsLimit: null,
      usersLimit: 1000,
      runsUsed: 0,
    };
    const id = org.organizationId;
    // No route under /api/svc/ writes an organization, its billing or its keys.
    const paths = [
      `/api/svc/organizations/${id}`,
      '/api/svc/organizations',
      '/api/svc/organization',
      `/api/svc/organizations/${id}/limits`,
      '/api/svc/billing',
      '/api/svc/billing/status',
      '/api/svc/billing/plan',
      '/api/svc/billing/limits',
      '/api/svc/keys',
      '/api/svc/api-keys',
      `/api/svc/organizations/${id}/keys`,
    ];
    for (const path of paths) {
      for (const method of ['PATCH', 'PUT', 'POST'] as const) {
        const res = await call(org, { method, url: path, body: upgrade });
        // A path that exists for reading only says so (405, with what it serves); the others
        // do not exist at all.
        if (path === '/api/svc/billing/status') {
          assertEnvelope(res, 405, 'method_not_allowed');
          assert.equal(res.headers.allow, 'GET, HEAD');
        } else {
          assertEnvelope(res, 404, 'not_found');
        }
      }
    }
    // The operators' area does not take an API key.
    for (const [method, url, body] of [
      ['PATCH', `/api/admin/organizations/${id}`, { plan: 'paid', rateLimitPerMinute: 100_000 }],
      ['POST', `/api/admin/organizations/${id}/keys`, { name: 'mine now' }],
      ['POST', '/api/admin/organizations', { name: 'Another', plan: 'paid' }],
    ] as const) {
      assertEnvelope(await call(org, { method, url, body }), 401, 'unauthorized');
    }
    // Checkout and portal take the organization's id and nothing else.
    for (const kind of ['checkout', 'portal']) {
      const res = await call(org, { method: 'POST', url: `/api/svc/billing/${kind}`, body: upgrade });
      assertEnvelope(res, 400, 'validation_error');
    }
    // A billing event needs Stripe's signature; an API key does not stand in for it.
    const event = {
      id: 'evt_planted',
      type: 'customer.subscription.updated',
      data: { object: { status: 'active', metadata: { organizationId: id } } },
    };
    for (const signature of ['t=1,v1=00', undefined]) {
      const res = await call(org, {
        method: 'POST',
        url: '/api/svc/billing/webhook',
        body: event,
        ...(signature && { headers: { 'stripe-signature': signature } }),
      });
      assertEnvelope(res, 400, 'validation_error');
    }
    // The status read takes no plan either.
    assertValidation(
      await call(org, { method: 'GET', url: `/api/svc/billing/status?organizationId=${id}&plan=paid` }),
      '/query/plan',
    );

    const after = await status();
    assert.equal(after.status, 200, after.raw);
    assert.deepEqual(after.body, initial.body, 'billing status, plan and limits are the same');
    assert.equal(after.headers['x-ratelimit-limit'], '60', 'the rate limit is the free plan’s');
    assert.equal(await orgRow(), rowBefore, 'the organization row is untouched');
    assert.deepEqual(await keyRows(), keysBefore, 'no key was added');
  });
});
