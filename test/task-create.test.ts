import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Db } from '../src/db/db.ts';
import { type CreatedTask, createTasks, type NewTask } from '../src/db/sql/task-create.ts';
import { findTask, type TaskWithLinks } from '../src/db/sql/tasks.ts';
import { TaskCreateBatcher } from '../src/domain/task-create-batcher.ts';
import { backendName, createTestDb, type TestDb } from './helpers/db.ts';
import { insertTask } from './helpers/fixtures.ts';

const LIMITS = { free: 5, paid: 100 };
/** The service's caps, far above what these tests create. */
const CAPS = { tasks: 100_000, taskPromptBytes: 1e9, destinations: 100_000 };

/**
 * Creates go through one statement for any number of tasks and organizations (src/db/sql/
 * task-create.ts), and the service sends several creates per statement when they arrive
 * faster than statements complete (TaskCreateBatcher). Each create must get exactly the answer
 * it would have got alone.
 */
describe(`task creates, one statement for many (${backendName})`, () => {
  let t: TestDb;
  let db: Db;

  before(async () => {
    t = await createTestDb();
    db = t.db;
  });
  after(() => t.dispose());

  async function newOrganization(plan: 'free' | 'paid' = 'free'): Promise<string> {
    const id = randomUUID();
    await db.query(
      `INSERT INTO organizations (id, name, plan, webhook_secret_sealed) VALUES ($1, 'Org', $2, 'sealed')`,
      [id, plan],
    );
    return id;
  }

  async function newSkill(organizationId: string): Promise<string> {
    const id = randomUUID();
    await db.query(
      `INSERT INTO skills (id, organization_id, name, slug, content, created_at, updated_at)
       VALUES ($1, $2, 'Skill', $3, 'Be brief.', now(), now())`,
      [id, organizationId, `skill-${id.slice(0, 8)}`],
    );
    return id;
  }

  function newTask(organizationId: string, links: Partial<NewTask['links']> = {}, name = 'Digest'): NewTask {
    const now = new Date('2030-01-01T00:00:00.000Z');
    return {
      row: {
        id: randomUUID(),
        organizationId,
        createdAt: now,
        name,
        prompt: 'Summarise the week.',
        model: 'openai/gpt-4o-mini',
        schedule: 'weekly',
        status: 'active',
        cron_expression: null,
        schedule_time: '08:30',
        schedule_days: ['monday', 'thursday'],
        timezone: 'Europe/Berlin',
        delivery_email: null,
        delivery_email_address: null,
        delivery_sms: null,
        delivery_phone_number: null,
        user_id: null,
        next_run_at: new Date('2030-01-02T07:30:00.000Z'),
        updated_at: now,
        max_cost_cents_per_run: null,
        output_schema: null,
        required_tools: null,
        monthly_cost_limit_cents: null,
      },
      links: { skillIds: [], sourceIds: [], destinations: [], ...links },
      wakeSchedulers: false,
    };
  }

  const activeTasks = async (organizationId: string) =>
    (
      await db.query<{ active_tasks: number; counted: number }>(
        `SELECT active_tasks, (SELECT count(*)::int FROM tasks WHERE organization_id = $1 AND status = 'active') AS counted
           FROM organizations WHERE id = $1`,
        [organizationId],
      )
    )[0];

  const outcome = (r: CreatedTask | undefined) => (r?.ok ? 'created' : r?.errorType);

  /**
   * Asserts that each created task was written as its answer says and that no refused one was;
   * returns the written ones with their inputs.
   */
  async function writtenAsAnswered(tasks: readonly NewTask[], results: readonly CreatedTask[]) {
    const written: { input: NewTask; stored: TaskWithLinks }[] = [];
    for (const [i, r] of results.entries()) {
      const input = tasks[i];
      assert.ok(input);
      const stored = await findTask(db, input.row.organizationId, input.row.id);
      if (!r.ok) {
        assert.equal(stored, undefined, `task ${i} was not to be written`);
        continue;
      }
      assert.ok(stored);
      assert.deepEqual({ ...r.task, latest_run_at: null }, { ...stored, latest_run_at: null });
      written.push({ input, stored });
    }
    return written;
  }

  test('a statement for several organizations answers each task as it would have been answered alone', async () => {
    const full = await newOrganization('free');
    for (let i = 0; i < 3; i++) await insertTask(db, full, {}); // 2 of its 5 places left
    const other = await newOrganization('free');
    const skillOfOther = await newSkill(other);
    const skillOfFull = await newSkill(full);
    const missing = randomUUID();

    const tasks = [
      newTask(full, {}, 'first'),
      newTask(
        full,
        { skillIds: [skillOfOther, randomUUID(), skillOfFull] },
        'foreign skills, takes no place',
      ),
      newTask(other, { skillIds: [skillOfOther, skillOfFull] }, 'foreign skill at index 1'),
      newTask(full, {}, 'second'),
      newTask(missing),
      newTask(other, { skillIds: [skillOfOther] }, 'own skill'),
      newTask(full, {}, 'over the limit'),
    ];
    const results = await createTasks(db, tasks, LIMITS, CAPS);

    assert.deepEqual(results.map(outcome), [
      'created',
      'foreign_ids',
      'foreign_ids',
      'created',
      'no_organization',
      'created',
      'tasks_limit',
    ]);
    // Only the organization's own skills count, and an unknown id is as foreign as another's.
    assert.deepEqual(results[1], {
      ok: false,
      errorType: 'foreign_ids',
      foreign: [
        { field: 'skillIds', index: 0 },
        { field: 'skillIds', index: 1 },
      ],
    });
    assert.deepEqual(results[2], {
      ok: false,
      errorType: 'foreign_ids',
      foreign: [{ field: 'skillIds', index: 1 }],
    });
    assert.deepEqual(results[6], { ok: false, errorType: 'tasks_limit', plan: 'free', tasksLimit: 5 });
    assert.deepEqual(await activeTasks(full), { active_tasks: 5, counted: 5 });
    assert.deepEqual(await activeTasks(other), { active_tasks: 1, counted: 1 });

    // What was written is what each answer says, attachments included; nothing else was.
    for (const { input, stored } of await writtenAsAnswered(tasks, results)) {
      assert.equal(stored.name, input.row.name);
      assert.deepEqual(stored.schedule_days, ['monday', 'thursday']);
      assert.deepEqual(stored.skill_ids, input.links.skillIds);
    }
  });

  test('a statement whose tasks have no attachments (its lighter form) applies the same rules and answers with what it wrote', async () => {
    const full = await newOrganization('free');
    for (let i = 0; i < 3; i++) await insertTask(db, full, {}); // 2 of its 5 places left
    const capped = await newOrganization('paid');
    for (let i = 0; i < 5; i++) await insertTask(db, capped, {}); // 1 place left under a cap of 6
    const tasks = [
      newTask(full, {}, 'first'),
      newTask(randomUUID()),
      newTask(capped, {}, 'within the cap'),
      newTask(full, {}, 'second'),
      newTask(capped, {}, 'past the cap'),
      newTask(full, {}, 'over the limit'),
    ];
    // The service's cap on an organization's tasks of any status: 6.
    const results = await createTasks(db, tasks, LIMITS, { ...CAPS, tasks: 6 });
    assert.deepEqual(results.map(outcome), [
      'created',
      'no_organization',
      'created',
      'created',
      'org_cap',
      'tasks_limit',
    ]);
    assert.deepEqual(results[4], { ok: false, errorType: 'org_cap', cap: 'tasks' });
    assert.deepEqual(await activeTasks(full), { active_tasks: 5, counted: 5 });
    for (const { stored } of await writtenAsAnswered(tasks, results)) {
      assert.deepEqual([stored.skill_ids, stored.source_ids, stored.destinations], [[], [], []]);
    }
  });

  test('attachments keep their order per task, destinations with their ids and labels', async () => {
    const org = await newOrganization('paid');
    const [a, b, c] = [await newSkill(org), await newSkill(org), await newSkill(org)];
    const dest = (value: string, label: string | null) => ({ id: randomUUID(), type: 'email', value, label });
    const tasks = [
      newTask(org, {
        skillIds: [c, a],
        destinations: [dest('x@example.com', 'X'), dest('y@example.com', null)],
      }),
      newTask(org, { skillIds: [b, c, a], destinations: [dest('z@example.com', null)] }),
      newTask(org, { skillIds: [] }),
    ];
    const results = await createTasks(db, tasks, LIMITS, CAPS);
    for (const [i, input] of tasks.entries()) {
      const stored = await findTask(db, org, input.row.id);
      assert.ok(stored && results[i]?.ok);
      assert.deepEqual(stored.skill_ids, input.links.skillIds);
      assert.deepEqual(stored.destinations, input.links.destinations);
    }
  });

  test('empty schedule days and null fields are stored as given', async () => {
    const org = await newOrganization('paid');
    const task = newTask(org);
    task.row.schedule = 'daily';
    task.row.schedule_days = [];
    task.row.schedule_time = null;
    task.row.next_run_at = null;
    task.row.delivery_email = true;
    task.row.delivery_email_address = 'ops@example.com';
    const [result] = await createTasks(db, [task], LIMITS, CAPS);
    assert.ok(result?.ok);
    const stored = await findTask(db, org, task.row.id);
    assert.deepEqual(stored?.schedule_days, []);
    assert.equal(stored?.schedule_time, null);
    assert.equal(stored?.next_run_at, null);
    assert.equal(stored?.delivery_email_address, 'ops@example.com');
  });

  test('creates sent at once share statements, and each gets its own answer', async () => {
    let statements = 0;
    const counting: Db = {
      ...db,
      backend: db.backend,
      query: (sql, params) => {
        if (sql.includes('INSERT INTO tasks')) statements++;
        return db.query(sql, params);
      },
    };
    const batcher = new TaskCreateBatcher(counting, CAPS);
    const org = await newOrganization('free');
    const results = await Promise.all(Array.from({ length: 30 }, () => batcher.create(newTask(org))));
    assert.equal(results.filter((r) => r.ok).length, 5);
    assert.equal(results.filter((r) => !r.ok && r.errorType === 'tasks_limit').length, 25);
    // At most 4 statements start at once; everything else waits for the next one.
    assert.ok(statements <= 8, `${statements} statements for 30 creates`);
    assert.deepEqual(await activeTasks(org), { active_tasks: 5, counted: 5 });
  });

  test('a task the database refuses fails alone: the others of its statement are created', async () => {
    const batcher = new TaskCreateBatcher(db, CAPS);
    const org = await newOrganization('paid');
    const refused = newTask(org, {}, 'refused');
    refused.row.schedule = 'yearly' as NewTask['row']['schedule']; // breaks a CHECK constraint
    const creates = [newTask(org), newTask(org), refused, newTask(org)].map((t) =>
      batcher.create(t).then(outcome, (err: { code?: string }) => `error ${err.code}`),
    );
    assert.deepEqual(await Promise.all(creates), ['created', 'created', 'error 23514', 'created']);
    assert.deepEqual(await activeTasks(org), { active_tasks: 3, counted: 3 });
  });

  test('when the database cannot be reached every create of the statement fails with it, without retries', async () => {
    let attempts = 0;
    const down: Db = {
      ...db,
      backend: { ...db.backend, maxConcurrency: 1 },
      query: async () => {
        attempts++;
        throw Object.assign(new Error('Connection terminated unexpectedly'), { code: '08006' });
      },
    };
    const batcher = new TaskCreateBatcher(down, CAPS);
    const org = await newOrganization('paid');
    const creates = Array.from({ length: 5 }, () =>
      batcher.create(newTask(org)).then(outcome, (err: { code?: string }) => `error ${err.code}`),
    );
    assert.deepEqual(await Promise.all(creates), Array(5).fill('error 08006'));
    // One alone, then the four that queued behind it together.
    assert.equal(attempts, 2);
  });
});
