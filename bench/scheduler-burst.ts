// End to end on PostgreSQL: real service processes (scheduler + worker roles), an instant model
// server in its own process, and many tasks due at one slot. Times are taken on the database
// server's clock (the clock the scheduler itself decides with), relative to the slot.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import pg from 'pg';
import { migrate } from '../src/db/migrate.ts';
import { openPostgres } from '../src/db/postgres.ts';
import {
  type Child,
  createDatabase,
  createOrganizations,
  sleep,
  startServiceProcess,
} from './scheduler-pg.ts';

export interface BurstConfig {
  processes: number;
  /** SVC_WORKER_CONCURRENCY; undefined = the service's default. */
  concurrency: number | undefined;
  /** SVC_ROLE=scheduler: no workers, only run creation is measured (no light phase). */
  schedulerOnly?: boolean;
}

export interface LagStats {
  runs: number;
  /** Slot to started_at, per run. */
  startLagP50Ms: number;
  startLagP99Ms: number;
  startLagMaxMs: number;
  failed: number;
}

export interface BurstResult extends LagStats {
  tasks: number;
  /** Slot until the last run was visible (committed), by polling every 50 ms; Infinity = not by the deadline. */
  allCreatedMs: number;
  /** Slot to the last run's created_at (the scheduler's clock reading for its batch). */
  lastCreatedAtMs: number;
  /** Slot to created_at, per run (svc_scheduler_dispatch_lag_seconds). */
  dispatchLagP50Ms: number;
  dispatchLagP99Ms: number;
  allStartedMs: number;
  allCompletedMs: number;
  /** Runs finished per second, from the slot to the last completion. */
  runsPerSecond: number;
  /** False when the deadline passed before every run completed. */
  finished: boolean;
  /** Counts at the end of following (the deadline when not finished). */
  atEnd: Progress;
  /** Statements active in PostgreSQL during the burst, when sampled. */
  activity?: ActivityShare[];
}

export interface ActivityShare {
  /** The service function that sends the statement (or the statement's start). */
  statement: string;
  /** Backends running it, on average over the samples (1.0 = one CPU's worth, or one waiter). */
  busy: number;
  /** The part of `busy` spent waiting for WAL (commit flushes). */
  walWait: number;
}

/** Statements of the service by their first words, named after the function that sends them. */
const STATEMENTS: [RegExp, string][] = [
  // The claim's three statements (a batch: the pick, the organizations' locks, the claim).
  [/^SELECT set_config\('svc\.claim_picked'/, 'claimRuns (worker claim)'],
  [/^SELECT count\(\*\)::int AS locked FROM/, 'claimRuns (worker claim)'],
  [/^WITH clock AS MATERIALIZED/, 'claimRuns (worker claim)'],
  [/^SELECT set_config\('plan_cache_mode'/, "Db.batch (a batch's plan settings)"],
  [/^WITH input AS \(\s+SELECT i\.\*, r\.task_id/, "recordLockedRunEndsStatement (worker: runs' ends)"],
  [
    /^SELECT t\.id FROM \(\s+SELECT count\(\*\) AS n FROM \(SELECT id FROM runs/,
    'lockRunsAndTasks (worker: a batch of ends)',
  ],
  [
    /^WITH input AS \(\s+SELECT \* FROM unnest\(\$1::uuid\[\], \$2::uuid\[\], \$3::text/,
    'recordModelCalls (worker: usage)',
  ],
  [/^WITH wanted AS/, 'insertSlotRuns (scheduler)'],
  [/^UPDATE tasks t SET next_run_at/, 'advanceTasks (scheduler)'],
  [
    /^(\/\* plan each time \*\/ )?SELECT id, organization_id, next_run_at, schedule/,
    'lockDueTasks (scheduler)',
  ],
  [/^SELECT \* FROM organizations WHERE id/, 'findOrganization (worker: run limit, usage report)'],
  [
    /^(\/\* plan each time \*\/ )?SELECT id, organization_id, attempts FROM runs/,
    'lockExpiredLeases (worker lease recovery)',
  ],
  [/^UPDATE runs SET lease_expires_at/, 'renewLeases (worker heartbeat)'],
  [/^COMMIT/, 'COMMIT'],
];

/**
 * Samples the active backends of the database every ~20 ms from `from` until `stop` resolves;
 * the benchmark's own statements are left out.
 */
async function sampleActivity(
  url: string,
  database: string,
  from: Date,
  stop: Promise<unknown>,
): Promise<ActivityShare[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const busy = new Map<string, { n: number; wal: number }>();
  let samples = 0;
  let done = false;
  void stop.finally(() => {
    done = true;
  });
  try {
    // From the slot on, by the database clock.
    while (
      !done &&
      !(await c.query<{ due: boolean }>('SELECT clock_timestamp() >= $1 AS due', [from])).rows[0]?.due
    ) {
      await sleep(20);
    }
    while (!done) {
      const { rows } = await c.query<{ q: string; wait: string | null }>(
        `SELECT regexp_replace(left(query, 120), '\\s+', ' ', 'g') AS q, wait_event_type || ':' || wait_event AS wait
           FROM pg_stat_activity
          WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid() AND application_name <> 'svc-bench'`,
        [database],
      );
      samples++;
      for (const r of rows) {
        const name = STATEMENTS.find(([re]) => re.test(r.q))?.[1] ?? r.q.slice(0, 60);
        const e = busy.get(name) ?? { n: 0, wal: 0 };
        e.n++;
        if (r.wait?.includes('WAL')) e.wal++;
        busy.set(name, e);
      }
      await sleep(20);
    }
  } finally {
    await c.end();
  }
  return [...busy]
    .map(([statement, e]) => ({
      statement,
      busy: e.n / Math.max(1, samples),
      walWait: e.wal / Math.max(1, samples),
    }))
    .sort((a, b) => b.busy - a.busy);
}

export interface ScenarioResult {
  /** A few tasks per slot (at most the workers' capacity) over several slots: no backlog. */
  light: (LagStats & { slots: number; perSlot: number }) | undefined;
  burst: BurstResult;
}

export interface ScenarioOptions {
  baseUrl: string;
  modelUrl: string;
  config: BurstConfig;
  tasks: number;
  organizations: number;
  /** Give up waiting for the burst's completion after this long (from the slot). */
  completionDeadlineMs: number;
  /** Sample pg_stat_activity during the burst: which statements keep PostgreSQL busy. */
  sampleActivity?: boolean;
  /** Write V8 CPU profiles of the service processes here (BENCH_CPU_PROF). */
  cpuProfDir: string | undefined;
}

/** The service's default SVC_WORKER_CONCURRENCY (src/config.ts). */
export const DEFAULT_CONCURRENCY = 4;
/** The light phase: this many slots a second apart, each with at most LIGHT_MAX_PER_SLOT runs. */
export const LIGHT_SLOTS = 5;
export const LIGHT_MAX_PER_SLOT = 16;

/** The stored tasks' model (in the shipped catalog). */
const MODEL = 'openai/gpt-5-mini';

/**
 * Inserts `count` daily tasks, round-robin over `orgs`, and returns the slot they are due at: a
 * whole second `leadMs` or more ahead of the database clock, computed in the same statement.
 * Their schedule_time is that slot's HH:MM (UTC), so the claimer does a daily task's work (the
 * next slot is tomorrow's); the slot itself is on a whole second rather than a whole minute, so
 * a round does not wait for the next minute.
 */
async function insertDueTasks(
  sql: pg.Client,
  orgs: string[],
  count: number,
  leadMs: number,
  prefix: string,
  slotSpacingMs = 0,
  perSlot = count,
): Promise<Date> {
  const { rows } = await sql.query<{ slot: Date }>(
    `WITH s AS (
       SELECT date_trunc('second', clock_timestamp() + make_interval(secs => $3::double precision / 1000))
              + interval '1 second' AS slot
     ), ins AS (
       INSERT INTO tasks (id, organization_id, name, prompt, model, schedule, status, schedule_time, timezone,
                          next_run_at, created_at, updated_at)
       SELECT gen_random_uuid(), ($1::uuid[])[1 + (i % cardinality($1::uuid[]))], $5 || ' ' || i,
              'Summarise item ' || i || ' in one line.', $6, 'daily', 'active',
              to_char(s.slot AT TIME ZONE 'UTC', 'HH24:MI'), 'UTC',
              s.slot + make_interval(secs => ((i / $7) * $4)::double precision / 1000), now(), now()
         FROM generate_series(0, $2 - 1) AS i, s
     )
     SELECT slot FROM s`,
    [orgs, count, leadMs, slotSpacingMs, prefix, MODEL, perSlot],
  );
  await sql.query("SELECT pg_notify('svc_tasks', '')");
  const slot = rows[0]?.slot;
  if (!slot) throw new Error('no slot');
  return slot;
}

/** Nearest-rank percentile of `n` values of which `sorted` are known (the rest are larger). */
function percentile(sorted: readonly number[], q: number, n: number): number {
  const i = Math.max(1, Math.ceil(q * n)) - 1;
  return i < sorted.length ? (sorted[i] ?? Number.NaN) : Number.POSITIVE_INFINITY;
}

interface SlotTimes {
  /** created_at - slot_at of the runs that exist, ascending (ms). */
  created: number[];
  /** started_at - slot_at of the runs that started, ascending (ms). */
  started: number[];
  /** completed_at - slot_at of the runs that completed, ascending (ms). */
  completed: number[];
  failed: number;
}

async function slotTimes(sql: pg.Client, from: Date, to: Date): Promise<SlotTimes> {
  const ms = (col: string) => `(extract(epoch FROM ${col} - slot_at) * 1000)::float8`;
  const { rows } = await sql.query<{ c: number; s: number | null; d: number | null; failed: boolean }>(
    `SELECT ${ms('created_at')} AS c, ${ms('started_at')} AS s, ${ms('completed_at')} AS d,
            status = 'failed' AS failed
       FROM runs WHERE slot_at BETWEEN $1 AND $2`,
    [from, to],
  );
  const asc = (v: (number | null)[]) => v.filter((x): x is number => x !== null).sort((a, b) => a - b);
  return {
    created: asc(rows.map((r) => r.c)),
    started: asc(rows.map((r) => r.s)),
    completed: asc(rows.map((r) => r.d)),
    failed: rows.filter((r) => r.failed).length,
  };
}

/** Start lag over `n` runs expected in [from, to]; a run not started counts as infinitely late. */
function lagStats(t: SlotTimes, n: number): LagStats {
  return {
    runs: t.created.length,
    startLagP50Ms: percentile(t.started, 0.5, n),
    startLagP99Ms: percentile(t.started, 0.99, n),
    startLagMaxMs: percentile(t.started, 1, n),
    failed: t.failed,
  };
}

export interface Progress {
  /** Since the slot, on the database clock. */
  ms: number;
  created: number;
  started: number;
  done: number;
}

async function progress(sql: pg.Client, from: Date, to: Date): Promise<Progress> {
  const { rows } = await sql.query<Progress>(
    `SELECT extract(epoch FROM clock_timestamp() - $1::timestamptz) * 1000 AS ms, count(*)::int AS created,
            count(started_at)::int AS started, count(completed_at)::int AS done
       FROM runs WHERE slot_at BETWEEN $1 AND $2`,
    [from, to],
  );
  const r = rows[0];
  return { ms: Number(r?.ms), created: r?.created ?? 0, started: r?.started ?? 0, done: r?.done ?? 0 };
}

/**
 * Polls until all `count` runs are done or `deadlineMs` after the slot passed: every 50 ms
 * until they all exist (that moment is the "all created" time), then every 250 ms.
 */
async function follow(
  sql: pg.Client,
  from: Date,
  to: Date,
  count: number,
  deadlineMs: number,
  until: 'created' | 'done' = 'done',
): Promise<{ allCreatedMs: number; finished: boolean; last: Progress }> {
  let allCreatedMs = Number.NaN;
  for (;;) {
    const p = await progress(sql, from, to);
    if (Number.isNaN(allCreatedMs) && p.created >= count) allCreatedMs = p.ms;
    if ((until === 'done' ? p.done : p.created) >= count) return { allCreatedMs, finished: true, last: p };
    if (p.ms > deadlineMs) return { allCreatedMs, finished: false, last: p };
    await sleep(Number.isNaN(allCreatedMs) ? 50 : 250);
  }
}

/**
 * One round of one configuration: a fresh database, the service processes, a light phase
 * (few runs per slot; not with the scheduler role alone) then the burst; the database is
 * dropped afterwards.
 */
export async function runScenario(o: ScenarioOptions): Promise<ScenarioResult> {
  const database = await createDatabase(o.baseUrl);
  const secretKey = randomBytes(32);
  const procs: Child[] = [];
  let sql: pg.Client | undefined;
  try {
    const db = await openPostgres(database.url, 4, () => undefined);
    let orgs: string[];
    try {
      await migrate(db);
      orgs = await createOrganizations(db, secretKey, o.organizations);
    } finally {
      await db.close();
    }
    const env: Record<string, string> = {
      DATABASE_URL: database.url,
      SVC_SECRET_KEY: secretKey.toString('base64'),
      SVC_ROLE: o.config.schedulerOnly ? 'scheduler' : 'scheduler,worker',
      SVC_CREATE_DEMO_ORG: 'false',
      SVC_MODEL_BASE_URL: o.modelUrl,
      SVC_MODEL_API_KEY: 'sk-bench',
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_SHUTDOWN_GRACE_SECONDS: '5',
    };
    if (o.config.concurrency !== undefined) env.SVC_WORKER_CONCURRENCY = String(o.config.concurrency);
    const nodeArgs: string[] = [];
    if (o.cpuProfDir) {
      mkdirSync(o.cpuProfDir, { recursive: true });
      nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${o.cpuProfDir}`);
    }
    procs.push(
      ...(await Promise.all(
        Array.from({ length: o.config.processes }, () => startServiceProcess(env, nodeArgs)),
      )),
    );
    sql = new pg.Client({ connectionString: database.url, application_name: 'svc-bench' });
    await sql.connect();

    const light = o.config.schedulerOnly ? undefined : await lightPhase(sql, orgs, o);

    // The burst starts from a quiet database: a checkpoint first (not timed), so that what was
    // written before it (the light phase, an earlier part of the run) is not flushed during it.
    // The scheduler part alone met its goal (1,010-1,367 ms to create 10,000 runs) where, run
    // after the API part's writes, the same code took 2,088-2,410 ms in four full runs.
    await sql.query('CHECKPOINT').catch(() => undefined);
    // The burst: every task due at one slot.
    const slot = await insertDueTasks(sql, orgs, o.tasks, 1500, 'burst');
    const followed = follow(
      sql,
      slot,
      slot,
      o.tasks,
      o.completionDeadlineMs,
      o.config.schedulerOnly ? 'created' : 'done',
    );
    const activity = o.sampleActivity
      ? sampleActivity(database.url, new URL(database.url).pathname.slice(1), slot, followed)
      : undefined;
    const { allCreatedMs, finished, last } = await followed;
    const times = await slotTimes(sql, slot, slot);
    const allCompletedMs = percentile(times.completed, 1, o.tasks);
    const endSeconds = (finished ? allCompletedMs : last.ms) / 1000;
    return {
      light,
      burst: {
        ...lagStats(times, o.tasks),
        tasks: o.tasks,
        allCreatedMs: Number.isNaN(allCreatedMs) ? Number.POSITIVE_INFINITY : allCreatedMs,
        lastCreatedAtMs: percentile(times.created, 1, o.tasks),
        dispatchLagP50Ms: percentile(times.created, 0.5, o.tasks),
        dispatchLagP99Ms: percentile(times.created, 0.99, o.tasks),
        allStartedMs: percentile(times.started, 1, o.tasks),
        allCompletedMs,
        runsPerSecond: last.done / endSeconds,
        finished,
        atEnd: last,
        ...(activity && { activity: await activity }),
      },
    };
  } finally {
    await sql?.end().catch(() => undefined);
    await Promise.all(procs.map((p) => p.stop()));
    await database.drop();
  }
}

/** Light load: LIGHT_SLOTS slots a second apart, each with at most the workers' capacity. */
async function lightPhase(
  sql: pg.Client,
  orgs: string[],
  o: ScenarioOptions,
): Promise<ScenarioResult['light']> {
  const capacity = o.config.processes * (o.config.concurrency ?? DEFAULT_CONCURRENCY);
  const perSlot = Math.min(capacity, LIGHT_MAX_PER_SLOT, o.organizations);
  const lightFirst = await insertDueTasks(
    sql,
    orgs.slice(0, perSlot),
    perSlot * LIGHT_SLOTS,
    1500,
    'light',
    1000,
    perSlot,
  );
  const lightLast = new Date(lightFirst.getTime() + (LIGHT_SLOTS - 1) * 1000);
  await follow(sql, lightFirst, lightLast, perSlot * LIGHT_SLOTS, 20_000 + LIGHT_SLOTS * 1000);
  const lightTimes = await slotTimes(sql, lightFirst, lightLast);
  return { ...lagStats(lightTimes, perSlot * LIGHT_SLOTS), slots: LIGHT_SLOTS, perSlot };
}
