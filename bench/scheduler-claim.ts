// The cost of one claim cycle (DueTaskClaimer.tick()) as the tasks table grows, with a fixed
// number of tasks due. The service's Deps are built in-process by startService (no listening,
// no loops), so the measured code is exactly the scheduler role's.
import { randomBytes } from 'node:crypto';
import type { Writable } from 'node:stream';
import { loadConfig } from '../src/config.ts';
import type { Db, Queryable } from '../src/db/db.ts';
import { pickStatement } from '../src/db/sql/run-claim.ts';
import { lockDueTasks, nearestDueAt } from '../src/db/sql/scheduler.ts';
import { createLogger } from '../src/lib/logger.ts';
import { startService } from '../src/service.ts';
import { createDatabase, createOrganizations, median } from './scheduler-pg.ts';

export interface ClaimCycleResult {
  backend: 'postgres' | 'pglite';
  total: number;
  due: number;
  /** Seconds to insert the tasks (generate_series) and ANALYZE them. */
  insertSeconds: number;
  /** tick() creating `due` runs: median and every round, ms. */
  tickMs: number;
  tickRoundsMs: number[];
  /** tick() with nothing due (the look a woken scheduler makes), median ms. */
  idleTickMs: number;
  /** nearestDueAt (the sleep computation), median ms. */
  nearestDueMs: number;
  /** EXPLAIN (ANALYZE, BUFFERS) of the due-task query with `due` tasks due. */
  plan: { executionMs: number; usesDueIndex: boolean; keyLine: string; lines: string[] };
  /** The worker's claim statement with backlogs of pending runs, when asked. */
  workerClaim?: WorkerClaimPlan[];
}

export interface WorkerClaimPlan {
  pending: number;
  executionMs: number;
  keyLines: string[];
}

const ORGANIZATIONS = 100;
const MODEL = 'openai/gpt-5-mini';

/** Log lines are produced (their cost is part of a cycle) and dropped. */
const nullStream = { write: () => true } as unknown as Writable;

class Rollback extends Error {}

/** The statement a service function sends, captured without running it. */
async function captureStatement(
  call: (q: Queryable) => Promise<unknown>,
): Promise<{ sql: string; params: readonly unknown[] }> {
  let captured: { sql: string; params: readonly unknown[] } | undefined;
  const recorder: Queryable = {
    async query<R>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
      captured ??= { sql, params };
      return [];
    },
    async exec() {},
  };
  await call(recorder);
  if (!captured) throw new Error('no statement was sent');
  return captured;
}

/** EXPLAIN (ANALYZE, BUFFERS) of a service statement, in a transaction that is rolled back. */
async function explain(db: Db, statement: { sql: string; params: readonly unknown[] }): Promise<string[]> {
  let lines: string[] = [];
  await db
    .transaction(async (tx) => {
      const rows = await tx.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN (ANALYZE, BUFFERS) ${statement.sql}`,
        statement.params,
      );
      lines = rows.map((r) => r['QUERY PLAN']);
      throw new Rollback();
    })
    .catch((err: unknown) => {
      if (!(err instanceof Rollback)) throw err;
    });
  return lines;
}

const executionMs = (lines: string[]) =>
  Number(
    /([\d.]+) ms/.exec(lines.find((l) => l.trim().startsWith('Execution Time')) ?? '')?.[1] ?? Number.NaN,
  );

/** The due-task query of a claim (lockDueTasks), as the claimer sends it. */
async function explainDueQuery(db: Db, due: number): Promise<ClaimCycleResult['plan']> {
  const lines = await explain(db, await captureStatement((q) => lockDueTasks(q, new Date(), due)));
  const index = lines.find((l) => l.includes('tasks_due_idx')) ?? '';
  return {
    executionMs: executionMs(lines),
    usesDueIndex: index !== '',
    keyLine: index.trim().replace(/^->\s*/, ''),
    lines,
  };
}

/**
 * The worker's claim with `pending` runs waiting: how its cost grows with the backlog. Its
 * pick is explained (the ranking over the organizations with pending runs, what could grow); the
 * claim that follows ranks only the organizations picked. Pending runs are added by SQL (one per task without a run) up to `pending`.
 */
async function explainWorkerClaim(db: Db, pending: number): Promise<WorkerClaimPlan> {
  await db.query(
    `INSERT INTO runs (id, organization_id, task_id, slot_at, trigger, status, created_at)
     SELECT gen_random_uuid(), t.organization_id, t.id, t.next_run_at, 'schedule', 'pending', clock_timestamp()
       FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = t.id)
      LIMIT greatest(0, $1 - (SELECT count(*) FROM runs WHERE status = 'pending'))`,
    [pending],
  );
  await db.exec('ANALYZE runs');
  const lines = await explain(
    db,
    pickStatement({ workerId: 'bench', now: new Date(), leaseMs: 30_000, limit: 4, orgLimit: 2 }),
  );
  return {
    pending,
    executionMs: executionMs(lines),
    keyLines: lines
      .filter((l) => /WindowAgg|Sort|Scan|Execution Time/.test(l) && !/Sort (Method|Key)/.test(l))
      .map((l) => l.trim().replace(/^->\s*/, '')),
  };
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/**
 * Measures one table size: `total` tasks, of which `due` are due at each round (the rest are
 * spread over the next day). Between rounds the created runs are deleted and the same tasks made
 * due again, so every round does the same work.
 */
export async function measureClaimCycle(o: {
  backend: 'postgres' | 'pglite';
  baseUrl?: string | undefined;
  total: number;
  due: number;
  rounds: number;
  /** Afterwards, EXPLAIN the worker's claim with these numbers of pending runs (ascending, at most `total`). */
  workerClaimPending?: number[] | undefined;
}): Promise<ClaimCycleResult> {
  const secretKey = randomBytes(32);
  const database = o.backend === 'postgres' && o.baseUrl ? await createDatabase(o.baseUrl) : undefined;
  try {
    const config = loadConfig({
      ...(database && { DATABASE_URL: database.url }),
      SVC_DATA_DIR: 'memory://',
      SVC_SECRET_KEY: secretKey.toString('base64'),
      SVC_ROLE: 'scheduler',
      SVC_CREATE_DEMO_ORG: 'false',
      SVC_LOG_LEVEL: 'info',
    });
    const service = await startService(config, {
      listen: false,
      startLoops: false,
      log: createLogger('info', nullStream),
    });
    try {
      const { db } = service.deps;
      const scheduler = service.scheduler;
      if (!scheduler) throw new Error('the scheduler role is not running');
      const orgs = await createOrganizations(db, secretKey, ORGANIZATIONS);
      // Raise the task limit so the organizations' task counts are within their plan.
      await db.query(`UPDATE organizations SET limit_overrides = jsonb_build_object('tasksLimit', $1::int)`, [
        Math.ceil(o.total / ORGANIZATIONS),
      ]);

      const t0 = performance.now();
      // Not due: daily tasks spread over the next day's minutes, one hour ahead at the earliest.
      await db.query(
        `INSERT INTO tasks (id, organization_id, name, prompt, model, schedule, status, schedule_time, timezone,
                            next_run_at, created_at, updated_at)
         SELECT gen_random_uuid(), ($1::uuid[])[1 + (i % cardinality($1::uuid[]))], 'Task ' || i,
                'Summarise item ' || i || ' in one line.', $3, 'daily', 'active',
                to_char(at AT TIME ZONE 'UTC', 'HH24:MI'), 'UTC', at, now(), now()
           FROM (SELECT i, date_trunc('minute', now()) + interval '1 hour' + (i % 1440) * interval '1 minute' AS at
                   FROM generate_series(1, $2::int) AS i) g`,
        [orgs, o.total - o.due, MODEL],
      );
      const dueIds = (
        await db.query<{ id: string }>(
          `INSERT INTO tasks (id, organization_id, name, prompt, model, schedule, status, schedule_time, timezone,
                              next_run_at, created_at, updated_at)
           SELECT gen_random_uuid(), ($1::uuid[])[1 + (i % cardinality($1::uuid[]))], 'Due ' || i,
                  'Summarise item ' || i || ' in one line.', $3, 'daily', 'active',
                  to_char(now() AT TIME ZONE 'UTC', 'HH24:MI'), 'UTC', now() + interval '1 day', now(), now()
             FROM generate_series(1, $2::int) AS i
           RETURNING id`,
          [orgs, o.due, MODEL],
        )
      ).map((r) => r.id);
      await db.exec('ANALYZE tasks');
      const insertSeconds = (performance.now() - t0) / 1000;

      // Due again: the slot a second ago; the previous round's runs (and ledger rows) removed.
      const makeDue = async () => {
        await db.query('DELETE FROM runs WHERE task_id = ANY($1::uuid[])', [dueIds]);
        await db.query('DELETE FROM usage_ledger WHERE task_id = ANY($1::uuid[])', [dueIds]);
        await db.query(
          `UPDATE tasks SET next_run_at = date_trunc('second', clock_timestamp()) - interval '1 second',
                  schedule_time = to_char(clock_timestamp() AT TIME ZONE 'UTC', 'HH24:MI')
            WHERE id = ANY($1::uuid[])`,
          [dueIds],
        );
      };

      const tickRoundsMs: number[] = [];
      const idle: number[] = [];
      const nearest: number[] = [];
      // Round 0 warms up (JIT, plan and buffer caches) and is not counted.
      for (let round = 0; round <= o.rounds; round++) {
        await makeDue();
        let created = 0;
        const ms = await timed(async () => {
          created = (await scheduler.tick()).runsCreated;
        });
        if (created !== o.due) throw new Error(`tick created ${created} runs, expected ${o.due}`);
        const idleMs = await timed(() => scheduler.tick());
        const nearestMs = await timed(() => nearestDueAt(db));
        if (round > 0) {
          tickRoundsMs.push(ms);
          idle.push(idleMs);
          nearest.push(nearestMs);
        }
      }
      await makeDue();
      const plan = await explainDueQuery(db, o.due);
      const workerClaim: WorkerClaimPlan[] = [];
      for (const pending of o.workerClaimPending ?? []) {
        workerClaim.push(await explainWorkerClaim(db, Math.min(pending, o.total)));
      }
      return {
        backend: o.backend,
        total: o.total,
        due: o.due,
        insertSeconds,
        tickMs: median(tickRoundsMs),
        tickRoundsMs,
        idleTickMs: median(idle),
        nearestDueMs: median(nearest),
        plan,
        ...(workerClaim.length && { workerClaim }),
      };
    } finally {
      await service.stop();
    }
  } finally {
    await database?.drop();
  }
}
