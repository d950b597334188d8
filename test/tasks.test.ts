import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { openPostgres } from '../src/db/postgres.ts';
import { pageTaskRows } from '../src/db/sql/list-pages.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { startTestService, type TestService } from './helpers/service.ts';

describe('tasks', () => {
  // A Sunday morning in UTC; Monday already in Pacific/Auckland.
  const clock = new ManualClock('2027-03-07T20:30:00Z');
  let svc: TestService;
  let org: { organizationId: string; apiKey: string };
  let other: { organizationId: string; apiKey: string };
  const base = () => ({
    organizationId: org.organizationId,
    name: 'Morning brief',
    prompt: 'Summarise the news',
  });
  const create = (body: Record<string, unknown>, key = org.apiKey) =>
    svc.call({ method: 'POST', url: '/api/svc/tasks', key, body });

  before(async () => {
    svc = await startTestService({ clock });
    org = await svc.createOrg('paid');
    other = await svc.createOrg('paid');
  });
  after(() => svc.close());

  test('a task created with only the required fields gets the documented defaults', async () => {
    const res = await create(base());
    assert.equal(res.status, 201, res.raw);
    const t = res.body;
    assert.equal(t.schedule, 'once');
    assert.equal(t.status, 'active');
    assert.equal(t.timezone, 'UTC');
    assert.equal(t.organizationId, org.organizationId);
    assert.equal(typeof t.model, 'string');
    assert.equal(t.nextRunAt, '2027-03-07T20:30:00.000Z', 'once without a time runs as soon as possible');
    assert.equal(t.lastRunAt, null);
    assert.deepEqual(t.skillIds, []);
    assert.deepEqual(t.destinations, []);
    const models = await svc.call({ method: 'GET', url: '/api/svc/models', key: org.apiKey });
    const def = models.body.find((m: { routerModelId: string }) => m.routerModelId === t.model);
    assert.ok(def, 'the default model is a catalog model');
  });

  test('nextRunAt is computed in the task timezone for daily, weekly, hourly and cron schedules', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ schedule: 'daily' }, '2027-03-08T09:00:00.000Z'],
      [{ schedule: 'daily', scheduleTime: '21:15' }, '2027-03-07T21:15:00.000Z'],
      [{ schedule: 'hourly' }, '2027-03-07T21:00:00.000Z'],
      [
        { schedule: 'daily', scheduleTime: '08:00', timezone: 'America/New_York' },
        '2027-03-08T13:00:00.000Z',
      ],
      [
        { schedule: 'weekly', scheduleDays: ['wednesday'], scheduleTime: '07:30', timezone: 'Europe/Berlin' },
        '2027-03-10T06:30:00.000Z',
      ],
      [
        { schedule: 'daily', cronExpression: '0 12 * * 1-5', timezone: 'Asia/Tokyo' },
        '2027-03-08T03:00:00.000Z',
      ],
    ];
    for (const [extra, expected] of cases) {
      const res = await create({ ...base(), ...extra });
      assert.equal(res.status, 201, res.raw);
      assert.equal(res.body.nextRunAt, expected, JSON.stringify(extra));
    }
  });

  test('every constraint answers 400 naming the field', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ name: '' }, '/body/name'],
      [{ name: 'x'.repeat(256) }, '/body/name'],
      [{ prompt: '' }, '/body/prompt'],
      [{ name: 7 }, '/body/name'],
      [{ schedule: 'monthly' }, '/body/schedule'],
      [{ scheduleTime: '24:00' }, '/body/scheduleTime'],
      [{ scheduleTime: '9:00' }, '/body/scheduleTime'],
      [{ scheduleDays: ['funday'] }, '/body/scheduleDays/0'],
      [{ timezone: 'Mars/Olympus' }, '/body/timezone'],
      [{ cronExpression: '61 * * * *' }, '/body/cronExpression'],
      [{ cronExpression: '0 0 * * * *' }, '/body/cronExpression'],
      [{ model: 'no-such-model' }, '/body/model'],
      [{ deliveryEmailAddress: 'not-an-email' }, '/body/deliveryEmailAddress'],
      [{ deliveryPhoneNumber: '0800 123' }, '/body/deliveryPhoneNumber'],
      [{ deliveryEmail: true }, '/body/deliveryEmailAddress'],
      [{ destinations: [{ type: 'pigeon', value: 'x' }] }, '/body/destinations/0/type'],
      [{ destinations: [{ type: 'webhook', value: 'ftp://example.com' }] }, '/body/destinations/0/value'],
      [{ destinations: [{ type: 'sms', value: '12345' }] }, '/body/destinations/0/value'],
      [{ skillIds: ['not-a-uuid'] }, '/body/skillIds/0'],
      [{ status: 'paused' }, '/body/status'],
      [{ id: '00000000-0000-4000-8000-000000000000' }, '/body/id'],
    ];
    for (const [patch, path] of bad) {
      const res = await create({ ...base(), ...patch });
      assert.equal(res.status, 400, `${JSON.stringify(patch)} → ${res.raw}`);
      assert.equal(res.body.error.code, 'validation_error');
      const paths = res.body.error.details.map((d: { path: string }) => d.path);
      assert.ok(paths.includes(path), `${JSON.stringify(patch)}: ${paths.join(', ')}`);
    }
    const missing = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: org.apiKey,
      body: { organizationId: org.organizationId },
    });
    const paths = missing.body.error.details.map((d: { path: string }) => d.path).sort();
    assert.deepEqual(paths, ['/body/name', '/body/prompt']);
  });

  test('an organizationId in the body that is not the key\u2019s organization is a 401', async () => {
    const res = await create({ ...base(), organizationId: other.organizationId });
    assert.equal(res.status, 401);
  });

  test('get, list, patch and delete a task; editing schedule fields recomputes nextRunAt', async () => {
    clock.advance(1000); // newer than the tasks made above, which share one frozen instant
    const created = (await create({ ...base(), schedule: 'daily', scheduleTime: '06:00' })).body;
    const url = `/api/svc/tasks/${created.id}`;
    assert.deepEqual((await svc.call({ method: 'GET', url, key: org.apiKey })).body, created);
    const list = await svc.call({
      method: 'GET',
      url: `/api/svc/tasks?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    assert.equal(list.body[0].id, created.id, 'newest first');

    const moved = await svc.call({
      method: 'PATCH',
      url,
      key: org.apiKey,
      body: { scheduleTime: '22:00', name: 'Evening brief' },
    });
    assert.equal(moved.status, 200, moved.raw);
    assert.equal(moved.body.name, 'Evening brief');
    assert.equal(moved.body.nextRunAt, '2027-03-07T22:00:00.000Z');

    const renamed = await svc.call({
      method: 'PATCH',
      url,
      key: org.apiKey,
      body: { prompt: 'Other prompt' },
    });
    assert.equal(renamed.body.nextRunAt, '2027-03-07T22:00:00.000Z', 'a non-schedule edit keeps nextRunAt');

    assert.equal((await svc.call({ method: 'DELETE', url, key: org.apiKey })).status, 204);
    assert.equal((await svc.call({ method: 'GET', url, key: org.apiKey })).status, 404);
    clock.set('2027-03-07T20:30:00Z');
  });

  test('expand=skills,sources returns the attached objects in order, and only own ones can be attached', async () => {
    const skill = await svc.call({
      method: 'POST',
      url: '/api/svc/skills',
      key: org.apiKey,
      body: { organizationId: org.organizationId, name: 'Tone', content: 'Be brief.' },
    });
    assert.equal(skill.status, 201, skill.raw);
    const source = await svc.call({
      method: 'POST',
      url: '/api/svc/sources',
      key: org.apiKey,
      body: { organizationId: org.organizationId, name: 'Clock', type: 'local', config: {} },
    });
    assert.equal(source.status, 201, source.raw);
    const t = (await create({ ...base(), skillIds: [skill.body.id], sourceIds: [source.body.id] })).body;
    assert.deepEqual(t.skillIds, [skill.body.id]);
    const plain = await svc.call({ method: 'GET', url: `/api/svc/tasks/${t.id}`, key: org.apiKey });
    assert.equal(plain.body.skills, undefined);
    const expanded = await svc.call({
      method: 'GET',
      url: `/api/svc/tasks/${t.id}?expand=skills,sources`,
      key: org.apiKey,
    });
    assert.equal(expanded.body.skills[0].name, 'Tone');
    assert.equal(expanded.body.sources[0].name, 'Clock');

    const theirSkill = await svc.call({
      method: 'POST',
      url: '/api/svc/skills',
      key: other.apiKey,
      body: { organizationId: other.organizationId, name: 'Theirs', content: 'x' },
    });
    const steal = await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${t.id}`,
      key: org.apiKey,
      body: { skillIds: [theirSkill.body.id] },
    });
    assert.equal(steal.status, 400);
    assert.equal(steal.body.error.details[0].path, '/body/skillIds/0');
    const unchanged = await svc.call({ method: 'GET', url: `/api/svc/tasks/${t.id}`, key: org.apiKey });
    assert.deepEqual(unchanged.body.skillIds, [skill.body.id]);
  });

  test("a small organization's list beside a large one, once the table is analysed, is its own tasks, newest first", async () => {
    const small = await svc.createOrg('paid');
    const large = await svc.createOrg('paid');
    const mine: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await create(
        { organizationId: small.organizationId, name: `Mine ${i}`, prompt: 'p', schedule: 'daily' },
        small.apiKey,
      );
      assert.equal(res.status, 201, res.raw);
      mine.push(res.body.id);
    }
    const model = await create(
      {
        organizationId: large.organizationId,
        name: 'Theirs',
        prompt: 'p',
        schedule: 'daily',
      },
      large.apiKey,
    );
    assert.equal(model.status, 201, model.raw);
    // Many tasks of the other organization, copied in SQL, then statistics that say so.
    await svc.testDb.db.query(
      `INSERT INTO tasks SELECT (jsonb_populate_record(t, jsonb_build_object('id', gen_random_uuid()))).*
         FROM tasks t CROSS JOIN generate_series(1, 500) WHERE t.id = $1`,
      [model.body.id],
    );
    await svc.testDb.db.exec('ANALYZE tasks');
    // The documented order, read from the table itself (this test's tasks share one creation time).
    const newestFirst = (
      await svc.testDb.db.query<{ id: string }>(
        'SELECT id FROM tasks WHERE organization_id = $1 ORDER BY created_at DESC, id DESC',
        [small.organizationId],
      )
    ).map((r) => r.id);
    assert.deepEqual([...newestFirst].sort(), [...mine].sort());
    for (let round = 0; round < 7; round++) {
      const list = await svc.call({
        method: 'GET',
        url: `/api/svc/tasks?organizationId=${small.organizationId}`,
        key: small.apiKey,
      });
      assert.equal(list.status, 200, list.raw);
      assert.deepEqual(
        list.body.map((t: { id: string }) => t.id),
        newestFirst,
      );
    }
  });

  test('a page of tasks keeps one plan for every organization once the table is analysed, where a plain statement was planned anew at each request', async () => {
    const small = await svc.createOrg('paid');
    const large = await svc.createOrg('paid');
    for (let i = 0; i < 3; i++) {
      const res = await create(
        { organizationId: small.organizationId, name: `Mine ${i}`, prompt: 'p', schedule: 'daily' },
        small.apiKey,
      );
      assert.equal(res.status, 201, res.raw);
    }
    const model = await create(
      { organizationId: large.organizationId, name: 'Theirs', prompt: 'p', schedule: 'daily' },
      large.apiKey,
    );
    assert.equal(model.status, 201, model.raw);
    const { db } = svc.testDb;
    await db.query(
      `INSERT INTO tasks SELECT (jsonb_populate_record(t, jsonb_build_object('id', gen_random_uuid()))).*
         FROM tasks t CROSS JOIN generate_series(1, 2000) WHERE t.id = $1`,
      [model.body.id],
    );
    await db.exec('ANALYZE tasks');
    // One connection, whose prepared statements are its own to read: a new one on PostgreSQL.
    const one = svc.testDb.url ? await openPostgres(svc.testDb.url, 1, () => undefined) : db;
    try {
      const plans = async (like: string) =>
        (
          await one.query<{ generic: number; custom: number }>(
            `SELECT generic_plans::int AS generic, custom_plans::int AS custom
               FROM pg_prepared_statements WHERE statement LIKE $1`,
            [like],
          )
        )[0];
      const plain = `SELECT id FROM tasks WHERE organization_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2 -- ${randomUUID()}`;
      const page = '%svc_task_page($1, NULL, NULL, $2)%';
      const run = async () => {
        for (let i = 0; i < 10; i++) {
          assert.equal((await pageTaskRows(one, small.organizationId, 21)).length, 3);
          assert.equal((await one.query(plain, [small.organizationId, 21])).length, 3);
        }
      };
      // PostgreSQL plans a prepared statement for its values at its first five executions, then
      // keeps its generic plan if that is costed about as low. (The embedded database's one
      // connection may have run the page before, in other tests.)
      await run();
      const before = await plans(page);
      await run();
      // The plain statement: a plan for the values at each of its twenty executions.
      assert.deepEqual(await plans(`%${plain.slice(-36)}%`), { generic: 0, custom: 20 });
      // The page: its one generic plan for the ten after the first ten.
      const afterRuns = await plans(page);
      assert.deepEqual(
        {
          generic: (afterRuns?.generic ?? 0) - (before?.generic ?? 0),
          custom: (afterRuns?.custom ?? 0) - (before?.custom ?? 0),
        },
        { generic: 10, custom: 0 },
      );
    } finally {
      if (one !== db) await one.close();
    }
  });

  test('pausing clears nextRunAt and resuming computes it from now', async () => {
    const t = (await create({ ...base(), schedule: 'hourly' })).body;
    const url = `/api/svc/tasks/${t.id}`;
    const paused = await svc.call({ method: 'PATCH', url, key: org.apiKey, body: { status: 'paused' } });
    assert.equal(paused.body.status, 'paused');
    assert.equal(paused.body.nextRunAt, null);
    clock.advance(3 * 3600_000);
    const resumed = await svc.call({ method: 'PATCH', url, key: org.apiKey, body: { status: 'active' } });
    assert.equal(resumed.body.nextRunAt, '2027-03-08T00:00:00.000Z');
    clock.set('2027-03-07T20:30:00Z');
  });

  test('another organization\u2019s task answers 404 on every verb and stays unchanged', async () => {
    const theirs = (await create({ ...base(), organizationId: other.organizationId }, other.apiKey)).body;
    const url = `/api/svc/tasks/${theirs.id}`;
    for (const [method, extra, body] of [
      ['GET', '', undefined],
      ['PATCH', '', { name: 'stolen' }],
      ['DELETE', '', undefined],
      ['POST', '/run', undefined],
      ['GET', '/runs', undefined],
      ['GET', '/destinations', undefined],
      ['POST', '/destinations', { type: 'email', value: 'a@example.com' }],
    ] as const) {
      const res = await svc.call({ method, url: url + extra, key: org.apiKey, ...(body && { body }) });
      assert.equal(res.status, 404, `${method} ${extra}: ${res.raw}`);
    }
    const list = await svc.call({
      method: 'GET',
      url: `/api/svc/tasks?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    assert.ok(!list.body.some((x: { id: string }) => x.id === theirs.id));
    const still = await svc.call({ method: 'GET', url, key: other.apiKey });
    assert.deepEqual(still.body, theirs);
  });

  test('destinations are managed per task and keep their ids', async () => {
    const t = (
      await create({ ...base(), destinations: [{ type: 'email', value: 'ops@example.com', label: 'Ops' }] })
    ).body;
    assert.equal(t.destinations.length, 1);
    assert.ok(t.destinations[0].id);
    const url = `/api/svc/tasks/${t.id}/destinations`;
    const added = await svc.call({
      method: 'POST',
      url,
      key: org.apiKey,
      body: { type: 'webhook', value: 'https://example.com/hook' },
    });
    assert.equal(added.status, 201, added.raw);
    const changed = await svc.call({
      method: 'PATCH',
      url: `${url}/${added.body.id}`,
      key: org.apiKey,
      body: { label: 'Hook' },
    });
    assert.equal(changed.body.label, 'Hook');
    const bad = await svc.call({
      method: 'PATCH',
      url: `${url}/${added.body.id}`,
      key: org.apiKey,
      body: { type: 'sms' },
    });
    assert.equal(bad.status, 400, 'a URL is not a phone number');
    const list = await svc.call({ method: 'GET', url, key: org.apiKey });
    assert.deepEqual(
      list.body.map((d: { type: string }) => d.type),
      ['email', 'webhook'],
    );
    assert.equal(
      (await svc.call({ method: 'DELETE', url: `${url}/${added.body.id}`, key: org.apiKey })).status,
      204,
    );
    const task = await svc.call({ method: 'GET', url: `/api/svc/tasks/${t.id}`, key: org.apiKey });
    assert.equal(task.body.destinations.length, 1);
  });

  test('run now answers 202 with a pending run, once at a time, and lastRunAt follows it', async () => {
    const t = (await create({ ...base(), schedule: 'daily' })).body;
    const res = await svc.call({ method: 'POST', url: `/api/svc/tasks/${t.id}/run`, key: org.apiKey });
    assert.equal(res.status, 202, res.raw);
    assert.equal(res.body.status, 'pending');
    assert.equal(res.body.taskId, t.id);
    const again = await svc.call({ method: 'POST', url: `/api/svc/tasks/${t.id}/run`, key: org.apiKey });
    assert.equal(again.status, 409);
    const task = await svc.call({ method: 'GET', url: `/api/svc/tasks/${t.id}`, key: org.apiKey });
    assert.equal(task.body.lastRunAt, res.body.createdAt);
  });

  test('creating an active task beyond tasksLimit answers 403 plan_limit_exceeded', async () => {
    const small = await svc.createOrg('free');
    const mk = () =>
      svc.call({
        method: 'POST',
        url: '/api/svc/tasks',
        key: small.apiKey,
        body: { organizationId: small.organizationId, name: 'n', prompt: 'p', schedule: 'daily' },
      });
    const made = [];
    for (let i = 0; i < 5; i++) made.push((await mk()).body);
    const over = await mk();
    assert.equal(over.status, 403);
    assert.equal(over.body.error.code, 'plan_limit_exceeded');
    // Pausing one frees a place; resuming it while full is refused too.
    await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${made[0].id}`,
      key: small.apiKey,
      body: { status: 'paused' },
    });
    assert.equal((await mk()).status, 201);
    const resume = await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${made[0].id}`,
      key: small.apiKey,
      body: { status: 'active' },
    });
    assert.equal(resume.status, 403);
  });

  test("resuming follows the organization's tasksLimit override, as creating does", async () => {
    const small = await svc.createOrg('free');
    const url = `/api/admin/organizations/${small.organizationId}`;
    assert.equal(
      (await svc.call({ method: 'PATCH', url, admin: true, body: { tasksLimit: 1 } })).status,
      200,
    );
    const body = { organizationId: small.organizationId, name: 'n', prompt: 'p', schedule: 'daily' };
    const call = (method: string, path: string, payload: object) =>
      svc.call({ method, url: `/api/svc/tasks${path}`, key: small.apiKey, body: payload });
    const first = await call('POST', '', body);
    assert.equal(first.status, 201, first.raw);
    assert.equal((await call('POST', '', body)).status, 403);
    assert.equal((await call('PATCH', `/${first.body.id}`, { status: 'paused' })).status, 200);
    const second = await call('POST', '', body);
    assert.equal(second.status, 201, second.raw);
    const refused = await call('PATCH', `/${first.body.id}`, { status: 'active' });
    assert.equal(refused.status, 403, refused.raw);
    assert.equal(refused.body.error.code, 'plan_limit_exceeded');
    assert.match(refused.body.error.message, /allows 1 active tasks/);
    assert.equal(
      (await svc.call({ method: 'PATCH', url, admin: true, body: { tasksLimit: 2 } })).status,
      200,
    );
    assert.equal((await call('PATCH', `/${first.body.id}`, { status: 'active' })).status, 200);
  });

  test("a change's skills in upper case are the organization's; another's is named by its index", async () => {
    const skill = (o: typeof org, name: string) =>
      svc.call({
        method: 'POST',
        url: '/api/svc/skills',
        key: o.apiKey,
        body: { organizationId: o.organizationId, name: `${name} ${randomUUID()}`, content: 'x' },
      });
    const mine = await skill(org, 'Mine');
    const theirs = await skill(other, 'Theirs');
    const t = await create(base());
    assert.equal(t.status, 201, t.raw);
    const url = `/api/svc/tasks/${t.body.id}`;
    const ids = [mine.body.id.toUpperCase(), theirs.body.id];
    const refused = await svc.call({ method: 'PATCH', url, key: org.apiKey, body: { skillIds: ids } });
    assert.equal(refused.status, 400, refused.raw);
    assert.deepEqual(
      refused.body.error.details.map((d: { path: string }) => d.path),
      ['/body/skillIds/1'],
    );
    const ok = await svc.call({ method: 'PATCH', url, key: org.apiKey, body: { skillIds: [ids[0]] } });
    assert.equal(ok.status, 200, ok.raw);
    assert.deepEqual(ok.body.skillIds, [mine.body.id]);
  });

  test('creates sent all at once never pass tasksLimit', async () => {
    const small = await svc.createOrg('free');
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        svc.call({
          method: 'POST',
          url: '/api/svc/tasks',
          key: small.apiKey,
          body: { organizationId: small.organizationId, name: `n${i}`, prompt: 'p', schedule: 'daily' },
        }),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [...Array(5).fill(201), ...Array(15).fill(403)]);
    const [row] = await svc.service.deps.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM tasks WHERE organization_id = $1',
      [small.organizationId],
    );
    assert.equal(row?.n, 5);
  });

  test('the active-task count behind tasksLimit follows every write, the scheduler’s and plain SQL included', async () => {
    const small = await svc.createOrg('free');
    const db = svc.service.deps.db;
    const counted = async () => {
      const [row] = await db.query<{ kept: number; actual: number }>(
        `SELECT o.active_tasks AS kept,
                (SELECT count(*)::int FROM tasks t WHERE t.organization_id = o.id AND t.status = 'active') AS actual
           FROM organizations o WHERE o.id = $1`,
        [small.organizationId],
      );
      assert.ok(row);
      assert.equal(row.kept, row.actual);
      return row.kept;
    };
    const mk = async (schedule: string) => {
      const res = await svc.call({
        method: 'POST',
        url: '/api/svc/tasks',
        key: small.apiKey,
        body: { organizationId: small.organizationId, name: 'n', prompt: 'p', schedule },
      });
      assert.equal(res.status, 201, res.raw);
      return res.body.id as string;
    };
    const patch = (id: string, status: string) =>
      svc.call({ method: 'PATCH', url: `/api/svc/tasks/${id}`, key: small.apiKey, body: { status } });
    const [a, b, c] = [await mk('daily'), await mk('weekly'), await mk('once')];
    assert.equal(await counted(), 3);
    assert.equal((await patch(a, 'paused')).status, 200);
    assert.equal((await patch(a, 'paused')).status, 200); // unchanged status: no change of count
    assert.equal(await counted(), 2);
    assert.equal((await patch(a, 'active')).status, 200);
    assert.equal(await counted(), 3);
    // What the scheduler does to a one-off task after its run, and an operator's bulk SQL.
    await db.query("UPDATE tasks SET status = 'completed' WHERE id = $1", [c]);
    assert.equal(await counted(), 2);
    await db.query(
      `INSERT INTO tasks (id, organization_id, name, prompt, model, schedule, status, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'sql', 'p', 'm', 'daily', s, now(), now()
         FROM unnest(ARRAY['active', 'paused', 'active']) AS s`,
      [small.organizationId],
    );
    assert.equal(await counted(), 4);
    assert.equal(
      (await svc.call({ method: 'DELETE', url: `/api/svc/tasks/${b}`, key: small.apiKey })).status,
      204,
    );
    await db.query("DELETE FROM tasks WHERE organization_id = $1 AND name = 'sql' AND status = 'active'", [
      small.organizationId,
    ]);
    assert.equal(await counted(), 1);
    // The limit is read from the kept count: four more fit, the fifth does not.
    for (let i = 0; i < 4; i++) await mk('daily');
    const over = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: small.apiKey,
      body: { organizationId: small.organizationId, name: 'n', prompt: 'p', schedule: 'daily' },
    });
    assert.equal(over.status, 403);
    assert.equal(await counted(), 5);
  });

  test('skill ids and destination ids are accepted in upper case, like any uuid', async () => {
    const skill = await svc.call({
      method: 'POST',
      url: '/api/svc/skills',
      key: org.apiKey,
      body: { organizationId: org.organizationId, name: `Caps ${Date.now()}`, content: 'Be brief' },
    });
    assert.equal(skill.status, 201, skill.raw);
    const res = await create({
      ...base(),
      skillIds: [skill.body.id.toUpperCase()],
      destinations: [{ type: 'email', value: 'ops@example.com' }],
    });
    assert.equal(res.status, 201, res.raw);
    assert.deepEqual(res.body.skillIds, [skill.body.id]);
    const destinationId = res.body.destinations[0].id as string;
    const patched = await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${res.body.id}/destinations/${destinationId.toUpperCase()}`,
      key: org.apiKey,
      body: { label: 'Ops' },
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.equal(patched.body.label, 'Ops');
  });

  test('a task whose model left the catalog can still be paused; naming an unknown model is refused', async () => {
    const res = await create(base());
    assert.equal(res.status, 201);
    await svc.service.deps.db.query("UPDATE tasks SET model = 'retired/model-1' WHERE id = $1", [
      res.body.id,
    ]);
    const url = `/api/svc/tasks/${res.body.id}`;
    const paused = await svc.call({ method: 'PATCH', url, key: org.apiKey, body: { status: 'paused' } });
    assert.equal(paused.status, 200, paused.raw);
    assert.equal(paused.body.model, 'retired/model-1');
    const bad = await svc.call({ method: 'PATCH', url, key: org.apiKey, body: { model: 'retired/model-1' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.details[0].path, '/body/model');
  });
});
