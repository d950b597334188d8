import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createPostgresDatabase, TEST_DATABASE_URL } from './helpers/db.ts';
import { type ModelServer, startModelServer } from './helpers/model-server.ts';
import { type ServerProcess, startServerProcess } from './helpers/process.ts';
import { ADMIN_TOKEN } from './helpers/service.ts';
import { assertRunsMatchRecords, recordedOutcomes } from './helpers/slot-records.ts';
import { waitFor } from './helpers/wait.ts';

const PROCESSES = 3;
/** Hundreds of runs through three processes; generous, so a slow machine fails only on a hang. */
const LONG = { timeoutMs: 90_000, everyMs: 100 };

/**
 * Exactly once across processes: three real service processes (scheduler + worker + api each)
 * share one PostgreSQL database. Only PostgreSQL lets several processes share a database; the
 * embedded database serves one process, so this suite runs in the PostgreSQL pass.
 */
describe('scheduling across processes', {
  skip: !TEST_DATABASE_URL && 'several processes need a PostgreSQL server (run with TEST_DATABASE_URL)',
}, () => {
  let database: { url: string; drop(): Promise<void> };
  let sql: pg.Client;
  let model: ModelServer;
  let servers: ServerProcess[] = [];
  let organizationId: string;

  /** Inserts `count` daily tasks whose slot is the start of the current minute: all due at once. */
  async function insertDueTasks(count: number, promptPrefix: string): Promise<Date> {
    const [row] = (await sql.query<{ slot: Date }>("SELECT date_trunc('minute', now()) AS slot")).rows;
    const slot = row?.slot;
    assert.ok(slot);
    const hhmm = slot.toISOString().slice(11, 16);
    await sql.query(
      `INSERT INTO tasks (id, organization_id, name, prompt, model, schedule, status, schedule_time, timezone,
                          next_run_at, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'Load ' || i, $2 || ' ' || i || ' ' || gen_random_uuid(), 'openai/gpt-5-mini',
              'daily', 'active', $3, 'UTC', $4, now(), now()
         FROM generate_series(1, $5) AS i`,
      [organizationId, promptPrefix, hhmm, slot, count],
    );
    await sql.query("SELECT pg_notify('svc_tasks', '')");
    return slot;
  }

  /** Waits until `count` runs of the prefix's tasks exist and all have finished. */
  const finishedRunsOf = (promptPrefix: string, count: number) =>
    waitFor(
      `${count} finished runs`,
      async () => {
        const rows = await runsOf(promptPrefix);
        return rows.length >= count && rows.every((r) => r.status === 'completed' || r.status === 'failed')
          ? rows
          : undefined;
      },
      LONG,
    );

  const rows = async <T>(text: string, params?: unknown[]) => (await sql.query(text, params)).rows as T[];

  /** Each task of the prefix passed one slot: it has exactly one record, `ran`, naming its run. */
  async function assertOneRanRecordEach(promptPrefix: string, count: number) {
    const ids = (
      await rows<{ id: string }>(`SELECT id FROM tasks WHERE prompt LIKE $1 || ' %'`, [promptPrefix])
    ).map((r) => r.id);
    assert.equal(ids.length, count);
    assert.deepEqual(await recordedOutcomes(rows, ids), {
      ran: count,
      missed: 0,
      skipped_overlap: 0,
      skipped_budget: 0,
      skipped_run_limit: 0,
    });
    await assertRunsMatchRecords(rows, ids);
  }

  const runsOf = async (promptPrefix: string) =>
    (
      await sql.query<{ task_id: string; status: string; attempts: number; slot_at: Date }>(
        `SELECT r.task_id, r.status, r.attempts, r.slot_at FROM runs r JOIN tasks t ON t.id = r.task_id
          WHERE t.prompt LIKE $1 || ' %'`,
        [promptPrefix],
      )
    ).rows;

  before(async () => {
    if (!TEST_DATABASE_URL) return;
    database = await createPostgresDatabase();
    sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
    // "slow" prompts take long enough for a worker to be killed while it holds them.
    model = await startModelServer((req) =>
      (req.body.messages.at(-1)?.content ?? '').startsWith('slow') ? { delayMs: 400 } : { delayMs: 5 },
    );
    const env = {
      DATABASE_URL: database.url,
      SVC_SECRET_KEY: randomBytes(32).toString('base64'),
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_CREATE_DEMO_ORG: 'false',
      SVC_MODEL_BASE_URL: model.url,
      SVC_MODEL_API_KEY: 'sk-test',
      SVC_RUN_LEASE_SECONDS: '2',
      SVC_WORKER_CONCURRENCY: '8',
      SVC_ORG_CONCURRENCY: '100',
      SVC_LOG_LEVEL: 'info',
    };
    // The first process migrates the database; the others start against it together.
    servers.push(await startServerProcess(env));
    servers.push(
      ...(await Promise.all(Array.from({ length: PROCESSES - 1 }, () => startServerProcess(env)))),
    );
    const created = await fetch(`${servers[0]?.url}/api/admin/organizations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Load', plan: 'paid' }),
    });
    assert.equal(created.status, 201);
    organizationId = ((await created.json()) as { organizationId: string }).organizationId;
  });

  after(async () => {
    if (!TEST_DATABASE_URL) return;
    for (const s of servers) s.child.kill('SIGKILL');
    await Promise.all(servers.map((s) => s.exited));
    await sql?.end();
    await model?.close();
    await database?.drop();
  });

  test('500 tasks due in the same minute get exactly 500 runs, each executed once', async () => {
    const slot = await insertDueTasks(500, 'fast');
    const runs = await finishedRunsOf('fast', 500);
    assert.equal(runs.length, 500);
    assert.equal(new Set(runs.map((r) => r.task_id)).size, 500, 'one run per task');
    assert.ok(runs.every((r) => r.status === 'completed'));
    assert.ok(runs.every((r) => r.slot_at.getTime() === slot.getTime()));
    const prompts = model.requests
      .map((r) => r.body.messages.at(-1)?.content ?? '')
      .filter((p) => p.startsWith('fast'));
    assert.equal(prompts.length, 500, 'the model was called once per run');
    assert.equal(new Set(prompts).size, 500);
    const { rows } = await sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM tasks WHERE prompt LIKE 'fast %' AND next_run_at = $1::timestamptz + interval '1 day'`,
      [slot],
    );
    assert.equal(rows[0]?.n, 500, 'every task moved to its next slot');
    await assertOneRanRecordEach('fast', 500);
  });

  test('a worker killed with SIGKILL mid-run loses no run and duplicates none', async () => {
    const victim = servers[1];
    assert.ok(victim?.child.pid);
    await insertDueTasks(200, 'slow');
    // Wait until the victim holds runs, then kill it without warning.
    await waitFor(
      'the victim to hold runs',
      async () => {
        const { rows } = await sql.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM runs WHERE status = 'running' AND lease_owner LIKE '%:' || $1 || ':%'",
          [victim.child.pid],
        );
        return (rows[0]?.n ?? 0) > 0 ? true : undefined;
      },
      LONG,
    );
    victim.child.kill('SIGKILL');
    await victim.exited;

    const runs = await finishedRunsOf('slow', 200);
    assert.equal(runs.length, 200, 'no run lost, none duplicated');
    assert.equal(new Set(runs.map((r) => r.task_id)).size, 200);
    assert.ok(
      runs.every((r) => r.status === 'completed'),
      'none left running, none failed',
    );
    assert.ok(
      runs.some((r) => r.attempts >= 2),
      'the runs the killed worker held were taken over by another worker',
    );
    await assertOneRanRecordEach('slow', 200);
  });

  test('the surviving processes stop cleanly on SIGTERM and leave no run running', async () => {
    const alive = servers.filter((s) => s.child.exitCode === null && s.child.signalCode === null);
    for (const s of alive) s.child.kill('SIGTERM');
    const codes = await Promise.all(alive.map((s) => s.exited));
    assert.deepEqual(
      codes,
      alive.map(() => 0),
    );
    servers = [];
    const { rows } = await sql.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM runs WHERE status = 'running'",
    );
    assert.equal(rows[0]?.n, 0);
  });
});
