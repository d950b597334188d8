import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, test } from 'node:test';
import { assertEnvelope, assertValidation } from './helpers/assertions.ts';
import { type Org, resourceCalls, useTestService } from './helpers/fixtures.ts';
import type { Reply } from './helpers/service.ts';

/** One organization's full set of data, by the name of the path parameter that carries each id. */
interface DataSet {
  taskId: string;
  destinationId: string;
  runId: string;
  skillId: string;
  sourceId: string;
}

/**
 * Every id-bearing route under /api/svc/ (as registered: HEAD comes with each GET) and the body
 * its call sends. Bodies are valid, so that nothing but ownership can refuse the call.
 */
const MATRIX: Record<string, { body?: Record<string, unknown> }> = {
  'GET /api/svc/tasks/:taskId': {},
  'HEAD /api/svc/tasks/:taskId': {},
  'PATCH /api/svc/tasks/:taskId': { body: { name: 'Stolen', status: 'paused' } },
  'DELETE /api/svc/tasks/:taskId': {},
  'POST /api/svc/tasks/:taskId/run': {},
  'GET /api/svc/tasks/:taskId/runs': {},
  'HEAD /api/svc/tasks/:taskId/runs': {},
  'GET /api/svc/tasks/:taskId/slots': {},
  'HEAD /api/svc/tasks/:taskId/slots': {},
  'GET /api/svc/tasks/:taskId/upcoming': {},
  'HEAD /api/svc/tasks/:taskId/upcoming': {},
  'GET /api/svc/tasks/:taskId/destinations': {},
  'HEAD /api/svc/tasks/:taskId/destinations': {},
  'POST /api/svc/tasks/:taskId/destinations': { body: { type: 'email', value: 'thief@example.com' } },
  'PATCH /api/svc/tasks/:taskId/destinations/:destinationId': { body: { label: 'Stolen' } },
  'DELETE /api/svc/tasks/:taskId/destinations/:destinationId': {},
  'GET /api/svc/runs/:runId': {},
  'HEAD /api/svc/runs/:runId': {},
  'POST /api/svc/runs/:runId/redeliver': {},
  'POST /api/svc/runs/:runId/cancel': {},
  'POST /api/svc/runs/:runId/replay': { body: {} },
  'GET /api/svc/skills/:skillId': {},
  'HEAD /api/svc/skills/:skillId': {},
  'PATCH /api/svc/skills/:skillId': { body: { content: 'Stolen', isPublic: true } },
  'DELETE /api/svc/skills/:skillId': {},
  'GET /api/svc/sources/:sourceId': {},
  'HEAD /api/svc/sources/:sourceId': {},
  'PATCH /api/svc/sources/:sourceId': { body: { name: 'Stolen', isActive: true } },
  'DELETE /api/svc/sources/:sourceId': {},
  'POST /api/svc/sources/:sourceId/test': {},
  'POST /api/svc/sources/:sourceId/connect': {},
};

/** Id-bearing routes that hold no organization's data: the model catalog is the same for all. */
const SHARED_ROUTES = ['GET /api/svc/models/:modelId', 'HEAD /api/svc/models/:modelId'];

/** The organization-scoped lists, by the query they take. */
const LISTS = ['tasks', 'runs', 'skills', 'sources', 'stats', 'billing/status'];
const listUrl = (list: string, organizationId: string) => `/api/svc/${list}?organizationId=${organizationId}`;

const fill = (template: string, idOf: (param: string) => string) =>
  template.replace(/:(\w+)/g, (_, param: string) => idOf(param));

/** Two answers are one and the same 404: status, headers that describe the body, and the body itself. */
function assertSameNotFound(theirs: Reply, unknown: Reply, method: string) {
  assert.equal(theirs.status, 404, theirs.raw);
  assert.equal(unknown.status, 404, unknown.raw);
  if (method === 'HEAD') assert.equal(theirs.raw, '');
  else assertEnvelope(theirs, 404, 'not_found');
  assert.equal(theirs.raw, unknown.raw);
  assert.equal(theirs.headers['content-type'], unknown.headers['content-type']);
  assert.equal(theirs.headers['content-length'], unknown.headers['content-length']);
}

describe('tenant isolation', () => {
  // api role only: no scheduler or worker touches the runs while the matrix compares them.
  const fx = useTestService({ orgs: ['paid', 'paid'], env: { SVC_ROLE: 'api' } });
  const tasks = resourceCalls(fx, 'tasks');
  const skills = resourceCalls(fx, 'skills');
  const sources = resourceCalls(fx, 'sources');
  const A = () => fx.org;
  const B = () => fx.other;
  let a: DataSet;
  let b: DataSet;
  /** A's statistics and billing status before B had any data. */
  let aUsageAlone: string[];
  /** B's GET answers and database rows before A made any call. */
  let bBefore: { answers: string[]; rows: string };

  const created = (res: Reply, status = 201) => {
    assert.equal(res.status, status, res.raw);
    return res.body.id as string;
  };

  async function seed(o: Org): Promise<DataSet> {
    const skillId = created(await skills.create(o, { name: 'Playbook', content: 'Be thorough.' }));
    const sourceId = created(
      await sources.create(o, {
        type: 'api',
        name: 'Quotes API',
        config: { baseUrl: 'https://api.example.com/v1' },
        authType: 'bearer',
        authConfig: { token: `token-of-${o.organizationId}` },
      }),
    );
    const task = await tasks.create(o, {
      name: 'Morning brief',
      prompt: 'Summarise the quotes',
      schedule: 'daily',
      scheduleTime: '07:00',
      skillIds: [skillId],
      sourceIds: [sourceId],
      destinations: [{ type: 'email', value: 'ops@example.com', label: 'Ops' }],
    });
    const taskId = created(task);
    const runId = created(
      await fx.svc.call({ method: 'POST', url: `/api/svc/tasks/${taskId}/run`, key: o.apiKey }),
      202,
    );
    return { taskId, destinationId: task.body.destinations[0].id, runId, skillId, sourceId };
  }

  const usageOf = async (o: Org) => {
    const answers = [];
    for (const list of ['stats', 'billing/status']) {
      const res = await fx.svc.call({ method: 'GET', url: listUrl(list, o.organizationId), key: o.apiKey });
      assert.equal(res.status, 200, res.raw);
      answers.push(res.raw);
    }
    return answers;
  };

  /** Every GET of B's data with B's key, and B's rows in every table that holds them. */
  async function snapshot(o: Org, d: DataSet) {
    const urls = [
      `/api/svc/tasks/${d.taskId}?expand=skills,sources`,
      `/api/svc/tasks/${d.taskId}/destinations`,
      `/api/svc/tasks/${d.taskId}/runs`,
      `/api/svc/runs/${d.runId}`,
      `/api/svc/skills/${d.skillId}`,
      `/api/svc/sources/${d.sourceId}`,
      ...LISTS.map((list) => listUrl(list, o.organizationId)),
    ];
    const answers = [];
    for (const url of urls) {
      const res = await fx.svc.call({ method: 'GET', url, key: o.apiKey });
      assert.equal(res.status, 200, `${url}: ${res.raw}`);
      answers.push(`${url} ${res.raw}`);
    }
    const tables: Record<string, string> = {
      tasks: 'SELECT * FROM tasks WHERE organization_id = $1',
      task_destinations:
        'SELECT d.* FROM task_destinations d JOIN tasks t ON t.id = d.task_id WHERE t.organization_id = $1',
      task_skills:
        'SELECT x.* FROM task_skills x JOIN tasks t ON t.id = x.task_id WHERE t.organization_id = $1',
      task_sources:
        'SELECT x.* FROM task_sources x JOIN tasks t ON t.id = x.task_id WHERE t.organization_id = $1',
      runs: 'SELECT * FROM runs WHERE organization_id = $1',
      usage_ledger: 'SELECT * FROM usage_ledger WHERE organization_id = $1',
      skills: 'SELECT * FROM skills WHERE organization_id = $1',
      sources: 'SELECT * FROM sources WHERE organization_id = $1',
    };
    const rows: Record<string, unknown[]> = {};
    for (const [table, sql] of Object.entries(tables))
      rows[table] = await fx.db.query(sql, [o.organizationId]);
    return { answers, rows: JSON.stringify(rows) };
  }

  before(async () => {
    a = await seed(A());
    aUsageAlone = await usageOf(A());
    b = await seed(B());
    bBefore = await snapshot(B(), b);
  });

  test('the matrix covers every id-bearing route the service registers under /api/svc/', () => {
    const registered = new Set(
      fx.svc.app.registeredRoutes
        .filter((r) => r.url.startsWith('/api/svc/') && r.url.includes('/:'))
        .map((r) => `${r.method} ${r.url}`),
    );
    for (const shared of SHARED_ROUTES) {
      assert.ok(registered.delete(shared), `${shared} is still registered (or drop it from SHARED_ROUTES)`);
    }
    assert.deepEqual(
      [...registered].sort(),
      Object.keys(MATRIX).sort(),
      'an id-bearing route is missing from (or stale in) the isolation matrix',
    );
  });

  for (const [route, { body }] of Object.entries(MATRIX)) {
    const [method = '', template = ''] = route.split(' ');
    test(`${route} with the other organization's ids answers 404 exactly like unknown ids`, async () => {
      const call = (idOf: (param: string) => string) =>
        fx.svc.call({
          method: method as 'GET',
          url: fill(template, idOf),
          key: A().apiKey,
          ...(body && { body }),
        });
      const theirs = await call((param) => b[param as keyof DataSet]);
      const unknown = await call(() => randomUUID());
      assertSameNotFound(theirs, unknown, method);
    });
  }

  for (const method of ['PATCH', 'DELETE'] as const) {
    test(`${method} of the other organization's destination under an own task answers 404 like an unknown destination`, async () => {
      const call = (destinationId: string) =>
        fx.svc.call({
          method,
          url: `/api/svc/tasks/${a.taskId}/destinations/${destinationId}`,
          key: A().apiKey,
          ...(method === 'PATCH' && { body: { label: 'Stolen' } }),
        });
      assertSameNotFound(await call(b.destinationId), await call(randomUUID()), method);
      const own = await fx.svc.call({
        method: 'GET',
        url: `/api/svc/tasks/${a.taskId}/destinations`,
        key: A().apiKey,
      });
      assert.deepEqual(
        own.body.map((d: { id: string }) => d.id),
        [a.destinationId],
      );
    });
  }

  test("the lists show the organization's own rows and none of the other's", async () => {
    for (const [list, own, theirs] of [
      ['tasks', a.taskId, b.taskId],
      ['runs', a.runId, b.runId],
      ['skills', a.skillId, b.skillId],
      ['sources', a.sourceId, b.sourceId],
    ] as const) {
      const res = await fx.svc.call({
        method: 'GET',
        url: listUrl(list, A().organizationId),
        key: A().apiKey,
      });
      assert.equal(res.status, 200, res.raw);
      const ids = res.body.map((x: { id: string }) => x.id);
      assert.deepEqual(ids, [own], `${list} lists exactly the own row`);
      assert.ok(!res.raw.includes(theirs) && !res.raw.includes(B().organizationId), `${list} leaks B`);
    }
  });

  test("statistics and billing status count none of the other organization's tasks and runs", async () => {
    const bUsage = await usageOf(B());
    assert.equal(JSON.parse(bUsage[0] ?? '{}').totalTasks, 1, 'the other organization has a task to leak');
    assert.deepEqual(await usageOf(A()), aUsageAlone);
  });

  test("every organization-scoped list with the other organization's id answers 401", async () => {
    for (const list of LISTS) {
      const res = await fx.svc.call({
        method: 'GET',
        url: listUrl(list, B().organizationId),
        key: A().apiKey,
      });
      assertEnvelope(res, 401, 'unauthorized');
    }
  });

  test("creating a task, skill or source with the other organization's id in the body answers 401", async () => {
    const bodies = {
      tasks: { name: 'Planted', prompt: 'x' },
      skills: { name: 'Planted', content: 'x' },
      sources: { name: 'Planted', type: 'local', config: {} },
    };
    for (const [resource, body] of Object.entries(bodies)) {
      const res = await fx.svc.call({
        method: 'POST',
        url: `/api/svc/${resource}`,
        key: A().apiKey,
        body: { ...body, organizationId: B().organizationId },
      });
      assertEnvelope(res, 401, 'unauthorized');
    }
  });

  /** The answer with the id in question written as <id>, so that two answers can be compared. */
  const withoutId = (res: Reply, id: string) => JSON.parse(res.raw.replaceAll(id, '<id>'));

  for (const [field, ofB] of [
    ['skillIds', (d: DataSet) => d.skillId],
    ['sourceIds', (d: DataSet) => d.sourceId],
  ] as const) {
    test(`creating a task with the other organization's ${field} answers 400 exactly like unknown ids`, async () => {
      const attach = (id: string) => tasks.create(A(), { name: 'Thief', prompt: 'x', [field]: [id] });
      const unknownId = randomUUID();
      const theirs = await attach(ofB(b));
      const unknown = await attach(unknownId);
      assertValidation(theirs, `/body/${field}/0`);
      assert.deepEqual(withoutId(theirs, ofB(b)), withoutId(unknown, unknownId));
      assert.equal((await tasks.list(A())).body.length, 1, 'no task was created');
    });

    test(`setting the other organization's ${field} on a task answers 400 exactly like unknown ids`, async () => {
      const attach = (id: string) => tasks.patch(A(), a.taskId, { [field]: [id] });
      const unknownId = randomUUID();
      const theirs = await attach(ofB(b));
      const unknown = await attach(unknownId);
      assertValidation(theirs, `/body/${field}/0`);
      assert.deepEqual(withoutId(theirs, ofB(b)), withoutId(unknown, unknownId));
      const task = await tasks.get(A(), a.taskId);
      assert.deepEqual(task.body[field], [field === 'skillIds' ? a.skillId : a.sourceId]);
    });
  }

  test("after every call above, the other organization's data is byte-for-byte unchanged", async () => {
    const after = await snapshot(B(), b);
    assert.deepEqual(after.answers, bBefore.answers);
    assert.equal(after.rows, bBefore.rows);
  });
});
