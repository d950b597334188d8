// The run-engine benchmark: a worker process (`node src/main.ts`, SVC_ROLE=worker) drains a
// backlog of pending runs against a model server in a process of its own, compared with the same
// number of plain HTTP calls to that model server at the same concurrency (the ceiling); and the
// worker's memory with 1,000 runs in flight against a model that answers in 5 s.
//
// `node bench/engine.ts worker-child` runs the service like src/main.ts, except that the worker
// concurrency comes from BENCH_WORKER_CONCURRENCY: SVC_WORKER_CONCURRENCY accepts at most 256,
// and the memory row needs 1,000 runs in flight in one process.
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.ts';
import type { Db } from '../src/db/db.ts';
import { openPglite } from '../src/db/pglite.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { insertRun } from '../src/db/sql/runs.ts';
import { newId } from '../src/lib/ids.ts';
import { runServer } from '../src/run-server.ts';
import type { PartOptions, PartResult } from './api.ts';
import {
  type Child,
  callJson,
  createDatabase,
  createPaidOrganization,
  fmt,
  mapConcurrent,
  median,
  newSecretKey,
  processMemory,
  progress,
  serviceEnv,
  sleep,
  startBaseline,
  startServiceProcess,
  table,
  weeklyTaskBody,
} from './baselines.ts';
import { backendsOf, engineSizes } from './sizes.ts';

const SELF = fileURLToPath(import.meta.url);

/** Organizations the runs are spread over (round-robin), each with a quarter of the tasks. */
const ORGANIZATIONS = 4;
/** Runs in flight for the memory row. */
const IN_FLIGHT = 1000;
const MEMORY_MODEL_DELAY_MS = 5000;
/** The service's default SVC_WORKER_CONCURRENCY (src/config). */
const DEFAULT_CONCURRENCY = 4;

interface Row {
  key: string;
  delayMs: number;
  concurrency: number;
  /** SVC_ORG_CONCURRENCY; undefined = the default (2), enough for 4 runs over 4 organizations. */
  orgConcurrency: number | undefined;
  runs: number;
  /** Runs the worker drains first, untimed (a fresh process runs its first ones cold). */
  warmUp: number;
}

interface Backend {
  name: 'pglite' | 'postgres';
  env: { databaseUrl?: string; dataDir?: string };
  secretKey: string;
  tasks: { id: string; organizationId: string }[];
  /** Runs fn with a database handle of the bench's own (PGlite: only while no child has it open). */
  withDb<T>(fn: (db: Db) => Promise<T>): Promise<T>;
  cleanup(): Promise<void>;
}

interface RowResult {
  rps: number;
  /** The warm-up runs' own rate: the first runs of a fresh process. */
  coldRps: number;
  failed: number;
}

interface MemoryResult {
  idleRss: number;
  /** The largest RSS sampled while all IN_FLIGHT model calls were outstanding. */
  inFlightRss: number;
  /** The largest RSS sampled at all. */
  maxRss: number;
  /** VmHWM at the end: the process's peak RSS over its whole life. */
  peakRss: number;
  maxModelInFlight: number;
  secondsToInFlight: number;
  failed: number;
}

async function setupBackend(name: 'pglite' | 'postgres', postgresUrl: string | undefined): Promise<Backend> {
  const secretKey = newSecretKey();
  let env: Backend['env'];
  let withDb: Backend['withDb'];
  let cleanup: () => Promise<void>;
  if (name === 'postgres') {
    if (!postgresUrl) throw new Error('no PostgreSQL');
    const created = await createDatabase(postgresUrl, 'svc_bench_engine');
    env = { databaseUrl: created.url };
    let db: Db | undefined;
    withDb = async (fn) => {
      db ??= await openPostgres(created.url, 2, () => undefined);
      return fn(db);
    };
    cleanup = async () => {
      await db?.close().catch(() => undefined);
      await created.drop();
    };
  } else {
    const dir = await mkdtemp(join(tmpdir(), 'svc-bench-engine-'));
    const dataDir = join(dir, 'svc');
    env = { dataDir };
    withDb = async (fn) => {
      const db = await openPglite(dataDir);
      try {
        return await fn(db);
      } finally {
        await db.close();
      }
    };
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  }
  // Organizations and one task each through the API of a service process (which also migrates);
  // the task is then copied in SQL (new ids), IN_FLIGHT / ORGANIZATIONS per organization, which
  // takes a moment where as many POSTs would take most of a quick run.
  const api = await startServiceProcess(serviceEnv(env, secretKey, { SVC_ROLE: 'api' }));
  const firsts: { id: string; organizationId: string }[] = [];
  try {
    for (let i = 0; i < ORGANIZATIONS; i++) {
      const org = await createPaidOrganization(api.url, `Engine ${i}`);
      const task = await callJson<{ id: string }>(`${api.url}/api/svc/tasks`, {
        method: 'POST',
        auth: org.apiKey,
        body: weeklyTaskBody(org.organizationId, 0),
        expect: 201,
      });
      firsts.push({ id: task.id, organizationId: org.organizationId });
    }
  } finally {
    await api.stop();
  }
  const perOrg = await withDb((db) =>
    db.transaction(async (tx) => {
      const lists: { id: string; organizationId: string }[][] = [];
      for (const first of firsts) {
        const copies = await tx.query<{ id: string }>(
          `INSERT INTO tasks
           SELECT (jsonb_populate_record(t, jsonb_build_object('id', gen_random_uuid(), 'name', t.name || ' #' || g))).*
             FROM tasks t CROSS JOIN generate_series(2, $2::int) g
            WHERE t.id = $1
           RETURNING id`,
          [first.id, IN_FLIGHT / ORGANIZATIONS],
        );
        lists.push([first, ...copies.map((c) => ({ id: c.id, organizationId: first.organizationId }))]);
      }
      return lists;
    }),
  );
  // Interleaved, so any prefix of the list spreads its runs evenly over the organizations.
  const tasks: Backend['tasks'] = [];
  for (let i = 0; i < IN_FLIGHT / ORGANIZATIONS; i++) {
    for (const list of perOrg) {
      const task = list[i];
      if (task) tasks.push(task);
    }
  }
  return { name, env, secretKey, tasks, withDb, cleanup };
}

/**
 * `n` pending on-demand runs, one per task from the `from`th, inserted as run-now inserts them
 * (run + ledger row), created `agoMs` ago (the warm-up runs are older: claimed first).
 */
async function insertRuns(
  db: Db,
  tasks: Backend['tasks'],
  n: number,
  from = 0,
  agoMs = 0,
): Promise<string[]> {
  if (from + n > tasks.length)
    throw new Error(`${from + n} runs wanted, one per task, of ${tasks.length} tasks`);
  return db.transaction(async (tx) => {
    const ids: string[] = [];
    for (const task of tasks.slice(from, from + n)) {
      const run = await insertRun(tx, {
        id: newId(),
        organizationId: task.organizationId,
        taskId: task.id,
        slotAt: null,
        trigger: 'manual',
        now: new Date(Date.now() - agoMs),
      });
      ids.push(run.id);
    }
    return ids;
  });
}

interface RunStats {
  completed: number;
  /** Runs not completed (failed, or still pending or running). */
  failed: number;
  /** From the first run's started_at to the last run's completed_at (database clock). */
  seconds: number;
}

async function runStats(db: Db, ids: string[]): Promise<RunStats> {
  const [row] = await db.query<{ completed: number; failed: number; first: Date | null; last: Date | null }>(
    `SELECT count(*) FILTER (WHERE status = 'completed')::int AS completed,
            count(*) FILTER (WHERE status <> 'completed')::int AS failed,
            min(started_at) AS first, max(completed_at) AS last
       FROM runs WHERE id = ANY($1::uuid[])`,
    [ids],
  );
  if (!row?.first || !row.last) throw new Error('no finished runs');
  return { completed: row.completed, failed: row.failed, seconds: (+row.last - +row.first) / 1000 };
}

/**
 * The database work between two worker processes, in one session (opening PGlite takes
 * seconds): the finished job's statistics, then the next job's pending runs.
 */
async function between(
  backend: Backend,
  finished: { ids: string[]; warmIds: string[]; discard: boolean } | undefined,
  next: { runs: number; warmUp: number },
): Promise<{
  stats: RunStats | undefined;
  coldStats: RunStats | undefined;
  ids: string[];
  warmIds: string[];
}> {
  return backend.withDb(async (db) => {
    let stats: RunStats | undefined;
    let coldStats: RunStats | undefined;
    if (finished?.discard) {
      // Runs stopped on purpose (released to pending): removed, so no later worker takes them.
      await db.query(`DELETE FROM runs WHERE id = ANY($1::uuid[]) AND status <> 'completed'`, [finished.ids]);
    } else if (finished) {
      stats = await runStats(db, finished.ids);
      if (finished.warmIds.length) coldStats = await runStats(db, finished.warmIds);
    }
    // The warm-up runs, created a minute earlier, come first in every organization's order.
    const warmIds = next.warmUp ? await insertRuns(db, backend.tasks, next.warmUp, next.runs, 60_000) : [];
    return {
      stats,
      coldStats,
      ids: next.runs ? await insertRuns(db, backend.tasks, next.runs) : [],
      warmIds,
    };
  });
}

async function finishedRuns(worker: Child): Promise<number> {
  const res = await fetch(`${worker.url}/metrics`);
  const text = await res.text();
  let n = 0;
  for (const m of text.matchAll(/^svc_worker_runs_finished_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
  return n;
}

async function waitFinished(worker: Child, n: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await finishedRuns(worker)) < n) {
    if (Date.now() > deadline) throw new Error(`the worker did not finish ${n} runs in time`);
    if (worker.proc.exitCode !== null) throw new Error(`the worker exited:\n${worker.stderr()}`);
    await sleep(100);
  }
}

function workerEnv(backend: Backend, modelUrl: string, extra: Record<string, string>) {
  return serviceEnv(backend.env, backend.secretKey, {
    SVC_ROLE: 'worker',
    SVC_MODEL_BASE_URL: modelUrl,
    SVC_MODEL_API_KEY: 'sk-bench-model-key',
    ...extra,
  });
}

/** A worker process drains the pending runs (inserted before) and stops. */
async function runRow(backend: Backend, row: Row, modelUrl: string, profileDir: string | undefined) {
  const worker = await startServiceProcess(
    workerEnv(backend, modelUrl, {
      SVC_WORKER_CONCURRENCY: String(row.concurrency),
      ...(row.orgConcurrency && { SVC_ORG_CONCURRENCY: String(row.orgConcurrency) }),
    }),
    profileDir
      ? {
          nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, `engine-${backend.name}-${row.key}`)}`],
        }
      : {},
  );
  try {
    await waitFinished(worker, row.warmUp + row.runs, 300_000);
  } finally {
    await worker.stop();
  }
}

/** The same number of plain streamed Chat Completions calls, at the same concurrency. */
async function httpCeiling(modelUrl: string, calls: number, concurrency: number): Promise<number> {
  const body = JSON.stringify({
    model: 'openai/gpt-4o-mini',
    messages: [
      {
        role: 'system',
        content: 'The current date and time is Monday, 3 March 2025, 08:30 (Europe/Berlin).',
      },
      { role: 'user', content: 'Summarise the week in five bullet points.' },
    ],
    stream: true,
    stream_options: { include_usage: true },
  });
  const call = async () => {
    const res = await fetch(`${modelUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-bench-model-key', 'content-type': 'application/json' },
      body,
    });
    await res.text();
    if (!res.ok) throw new Error(`model server: ${res.status}`);
  };
  await mapConcurrent(Array.from({ length: concurrency }), concurrency, call);
  const start = performance.now();
  await mapConcurrent(Array.from({ length: calls }), concurrency, call);
  return calls / ((performance.now() - start) / 1000);
}

async function modelInFlight(modelServer: Child): Promise<number> {
  const res = await fetch(`${modelServer.url.replace(/\/v1$/, '')}/stats`);
  return ((await res.json()) as { inFlight: number }).inFlight;
}

function memoryWorker(backend: Backend, modelServer: Child): Promise<Child> {
  const env = workerEnv(backend, modelServer.url, {
    // The largest SVC_ORG_CONCURRENCY accepts: 4 organizations × 250 runs each fit under it.
    SVC_ORG_CONCURRENCY: '256',
    BENCH_WORKER_CONCURRENCY: String(IN_FLIGHT),
    // A worker stopped early (quick runs) gives its runs back at once instead of waiting for them.
    SVC_SHUTDOWN_GRACE_SECONDS: '0',
  });
  return startServiceProcess(env, { script: SELF, args: ['worker-child'] });
}

/** RSS of the memory row's worker with nothing to do (no pending runs). */
async function idleRss(backend: Backend, modelServer: Child): Promise<number> {
  const idle = await memoryWorker(backend, modelServer);
  await sleep(1500);
  const rss = processMemory(idle.pid)?.rss ?? Number.NaN;
  await idle.stop();
  return rss;
}

/**
 * RSS of one worker process with IN_FLIGHT runs (inserted before) in flight against a 5 s model.
 * `untilDone`: sample until every run has finished; otherwise stop the worker 1 s after all the
 * model calls are in flight (quick runs; its runs are then released and discarded).
 */
async function runMemory(backend: Backend, modelServer: Child, untilDone: boolean): Promise<MemoryResult> {
  const worker = await memoryWorker(backend, modelServer);
  const started = performance.now();
  const result: MemoryResult = {
    idleRss: Number.NaN,
    inFlightRss: Number.NaN,
    maxRss: 0,
    peakRss: Number.NaN,
    maxModelInFlight: 0,
    secondsToInFlight: Number.NaN,
    failed: 0,
  };
  try {
    // Sample until every run has finished; "in flight" = all its model calls outstanding at once.
    for (;;) {
      const [inFlight, finished] = await Promise.all([modelInFlight(modelServer), finishedRuns(worker)]);
      const rss = processMemory(worker.pid)?.rss ?? 0;
      result.maxRss = Math.max(result.maxRss, rss);
      result.maxModelInFlight = Math.max(result.maxModelInFlight, inFlight);
      if (inFlight >= IN_FLIGHT) {
        result.inFlightRss = Math.max(Number.isNaN(result.inFlightRss) ? 0 : result.inFlightRss, rss);
        if (Number.isNaN(result.secondsToInFlight))
          result.secondsToInFlight = (performance.now() - started) / 1000;
      }
      if (finished >= IN_FLIGHT) break;
      if (!untilDone && performance.now() - started > (result.secondsToInFlight + 1) * 1000) break;
      if (performance.now() - started > 180_000) throw new Error(`${IN_FLIGHT} runs did not finish in time`);
      await sleep(100);
    }
    result.peakRss = processMemory(worker.pid)?.peak ?? Number.NaN;
  } finally {
    await worker.stop();
  }
  return result;
}

type Job = { kind: 'row'; row: Row } | { kind: 'memory' };

/** A job whose runs have been executed, waiting for its statistics from the next session. */
interface Done {
  job: Job;
  round: number;
  ids: string[];
  /** Its warm-up runs (drained first, counted apart). */
  warmIds: string[];
  /** The runs were stopped on purpose: delete them instead of counting them. */
  discard: boolean;
  memory?: MemoryResult;
}

const MB = 1024 * 1024;
const mb = (n: number) => (Number.isFinite(n) ? `${fmt(n)} MB` : 'not measured');

export async function benchEngine(options: PartOptions): Promise<PartResult> {
  const sizes = engineSizes(options.quick);
  const rounds = sizes.rounds;
  // One memory round: RSS barely varies between rounds, and recording 1,000 results on PGlite
  // takes most of a minute.
  const memoryRounds = 1;
  const rows: Row[] = sizes.rows.map((r) => ({ ...r }));
  // BENCH_ENGINE_ROWS=100ms-c4 (or =none: the memory measurement alone) measures only those rows.
  const onlyRows = process.env.BENCH_ENGINE_ROWS?.split(',');
  if (onlyRows) rows.splice(0, rows.length, ...rows.filter((r) => onlyRows.includes(r.key)));
  const backendNames = backendsOf(options.quick, options.postgresUrl);

  progress('engine: model servers');
  const delays = [0, 100, MEMORY_MODEL_DELAY_MS];
  const models = new Map<number, Child>(
    (await Promise.all(delays.map((d) => startBaseline('model', String(d))))).map((m, i) => [
      delays[i] ?? 0,
      m,
    ]),
  );
  const model = (delay: number) => {
    const m = models.get(delay);
    if (!m) throw new Error(`no model server with delay ${delay}`);
    return m;
  };

  const backends: Backend[] = [];
  const summary: Record<string, number> = {};
  try {
    progress(`engine: ${backendNames.join(', ')}: organizations and ${IN_FLIGHT} tasks`);
    const settled = await Promise.allSettled(
      backendNames.map((name) => setupBackend(name, options.postgresUrl)),
    );
    for (const s of settled) if (s.status === 'fulfilled') backends.push(s.value);
    for (const s of settled) if (s.status === 'rejected') throw s.reason;
    const ceilings = new Map<string, number[]>(rows.map((r) => [r.key, []]));
    const results = new Map<string, RowResult[]>();
    const memory = new Map<string, MemoryResult[]>();
    const idle = new Map<string, number>();
    const done = new Map<string, Done>();
    const record = (
      backend: Backend,
      d: Done,
      { stats, coldStats }: { stats: RunStats | undefined; coldStats: RunStats | undefined },
    ) => {
      if (d.job.kind === 'row' && stats) {
        const r = {
          rps: stats.completed / stats.seconds,
          coldRps: coldStats ? coldStats.completed / coldStats.seconds : Number.NaN,
          failed: stats.failed + (coldStats?.failed ?? 0),
        };
        const key = `${backend.name}.${d.job.row.key}`;
        results.set(key, [...(results.get(key) ?? []), r]);
        progress(
          `  engine ${backend.name} ${d.job.row.key} round ${d.round}/${rounds}: ${fmt(r.rps)} runs/s (first runs ${fmt(r.coldRps)}), not completed ${r.failed}`,
        );
      } else if (d.job.kind === 'memory' && d.memory) {
        const m = {
          ...d.memory,
          failed: stats ? stats.failed : Number.NaN,
          idleRss: idle.get(backend.name) ?? Number.NaN,
        };
        memory.set(backend.name, [...(memory.get(backend.name) ?? []), m]);
        progress(
          `  engine ${backend.name} memory round ${d.round}/${memoryRounds}: ${IN_FLIGHT} in flight ${fmt(m.inFlightRss / MB)} MB, peak ${fmt(m.peakRss / MB)} MB, not completed ${m.failed}`,
        );
      }
    };
    for (let round = 1; round <= rounds; round++) {
      for (const row of rows) {
        const c = await httpCeiling(model(row.delayMs).url, row.runs, row.concurrency);
        ceilings.get(row.key)?.push(c);
        progress(`  engine ceiling ${row.key} round ${round}/${rounds}: ${fmt(c)} calls/s`);
      }
      for (const backend of backends) {
        if (backend.name === 'pglite' && round > sizes.pgliteRounds) continue;
        if (round === 1 && sizes.idleRss) {
          idle.set(backend.name, await idleRss(backend, model(MEMORY_MODEL_DELAY_MS)));
        }
        const jobs: Job[] = [
          ...rows.map((row): Job => ({ kind: 'row', row })),
          ...(round <= memoryRounds ? [{ kind: 'memory' } as const] : []),
        ];
        for (const job of jobs) {
          const previous = done.get(backend.name);
          const next = await between(
            backend,
            previous,
            job.kind === 'row' ? job.row : { runs: IN_FLIGHT, warmUp: 0 },
          );
          const { ids, warmIds } = next;
          if (previous) record(backend, previous, next);
          if (job.kind === 'row') {
            await runRow(backend, job.row, model(job.row.delayMs).url, options.profileDir);
            done.set(backend.name, { job, round, ids, warmIds, discard: false });
          } else {
            const m = await runMemory(backend, model(MEMORY_MODEL_DELAY_MS), !options.quick);
            done.set(backend.name, { job, round, ids, warmIds, discard: options.quick, memory: m });
          }
        }
      }
    }
    for (const backend of backends) {
      const previous = done.get(backend.name);
      if (previous) record(backend, previous, await between(backend, previous, { runs: 0, warmUp: 0 }));
    }

    const sections: string[] = [];
    for (const backend of backends) {
      const lines: string[][] = [];
      for (const row of rows) {
        const rs = results.get(`${backend.name}.${row.key}`) ?? [];
        const rps = median(rs.map((r) => r.rps));
        const coldRps = median(rs.map((r) => r.coldRps));
        const ceiling = median(ceilings.get(row.key) ?? []);
        const failed = rs.reduce((s, r) => s + r.failed, 0);
        const prefix = `engine.${backend.name}.${row.key}`;
        summary[`${prefix}.rps`] = rps;
        summary[`${prefix}.coldRps`] = coldRps;
        summary[`${prefix}.ceiling`] = ceiling;
        summary[`${prefix}.ratio`] = rps / ceiling;
        summary[`${prefix}.failed`] = failed;
        lines.push([
          row.delayMs ? `${row.delayMs} ms` : 'instant',
          `${row.concurrency}${row.concurrency === DEFAULT_CONCURRENCY ? ' (default)' : ''}`,
          row.orgConcurrency ? String(row.orgConcurrency) : '2 (default)',
          `${row.warmUp} + ${row.runs}`,
          fmt(coldRps),
          fmt(rps),
          fmt(ceiling),
          `${fmt(rps / ceiling, 2)}×`,
          String(failed),
        ]);
      }
      const ms = memory.get(backend.name) ?? [];
      const idle = median(ms.map((m) => m.idleRss)) / MB;
      const inFlight = median(ms.map((m) => m.inFlightRss)) / MB;
      const peak = median(ms.map((m) => m.peakRss)) / MB;
      summary[`engine.${backend.name}.memory.idleMB`] = idle;
      summary[`engine.${backend.name}.memory.inFlightMB`] = inFlight;
      summary[`engine.${backend.name}.memory.peakMB`] = peak;
      summary[`engine.${backend.name}.memory.maxModelInFlight`] = median(ms.map((m) => m.maxModelInFlight));
      // Quick runs stop the memory worker early on purpose: completion is checked by full runs.
      const memoryFailed = ms.some((m) => Number.isNaN(m.failed))
        ? Number.NaN
        : ms.reduce((s, m) => s + m.failed, 0);
      summary[`engine.${backend.name}.memory.failed`] = memoryFailed;
      sections.push(
        [
          `#### ${backend.name === 'pglite' ? 'PGlite (data directory on disk)' : 'PostgreSQL'}`,
          '',
          table(
            [
              'model',
              'SVC_WORKER_CONCURRENCY',
              'SVC_ORG_CONCURRENCY',
              'runs (warm-up + measured)',
              'first runs of a fresh worker (warm-up), runs/s',
              'service runs/s',
              'HTTP-only calls/s (ceiling)',
              'service / ceiling',
              'runs not completed',
            ],
            lines,
          ),
          '',
          table(
            [
              `worker RSS, idle (concurrency ${IN_FLIGHT}; full runs only)`,
              `RSS with ${IN_FLIGHT} model calls in flight (max of samples)`,
              'max RSS sampled',
              'peak RSS (VmHWM, whole life)',
              'most model calls in flight at once',
              `s from listening until ${IN_FLIGHT} in flight (claiming starts before)`,
              'runs not completed',
            ],
            [
              [
                mb(idle),
                mb(inFlight),
                mb(median(ms.map((m) => m.maxRss)) / MB),
                mb(peak),
                fmt(median(ms.map((m) => m.maxModelInFlight))),
                fmt(median(ms.map((m) => m.secondsToInFlight))),
                Number.isNaN(memoryFailed) ? 'not checked (stopped early)' : String(memoryFailed),
              ],
            ],
          ),
        ].join('\n'),
      );
    }
    const markdown = [
      '## Run engine',
      '',
      `A worker process (as \`npm start\` runs it, \`SVC_ROLE=worker\`, default log level) drains a backlog of pending on-demand runs (inserted in SQL as run-now inserts them, with their ledger rows, one per task, spread evenly over ${ORGANIZATIONS} paid organizations; one weekly task per organization is created through the API and copied in SQL) against a Chat Completions stand-in in a process of its own (streamed answers, instant or after 100 ms). The worker first drains a warm-up of runs created a minute before the measured ones (so claimed first in every organization), as the peers part warms its workers: a fresh process runs its first few hundred runs with cold code (V8 compiles its hot functions as they run), and a worker runs for days, so what a run costs a warm worker is the measure; the warm-up's own rate is shown beside it. Runs/s is completed runs divided by the span from the first run's \`started_at\` to the last run's \`completed_at\` (database clock), so the worker's start-up is not counted. The ceiling is the same number of plain streamed calls to the same model server at the same concurrency, from the bench process with \`fetch\`. ${rounds} round(s)${backendNames.includes('pglite') && sizes.pgliteRounds < rounds ? ` (${sizes.pgliteRounds} on PGlite, whose figures are for information)` : ''}, medians; sizes in bench/sizes.ts; "runs not completed" is a total over the rounds and must be 0.`,
      '',
      `Memory: one worker process with ${IN_FLIGHT} runs in flight at once against a model server that answers in ${MEMORY_MODEL_DELAY_MS / 1000} s (${IN_FLIGHT} tasks over ${ORGANIZATIONS} organizations, \`SVC_ORG_CONCURRENCY=256\`). \`SVC_WORKER_CONCURRENCY\` accepts at most 256, so this worker is started by \`node bench/engine.ts worker-child\`, which is \`src/main.ts\` with \`config.worker.concurrency = ${IN_FLIGHT}\` set after \`loadConfig\`. RSS is read from /proc/<pid>/status (VmRSS, and VmHWM for the peak) every 100 ms, with the model server's count of calls in flight, ${options.quick ? 'until 1 s after all the calls were in flight; then the worker is stopped (`SVC_SHUTDOWN_GRACE_SECONDS=0`: the runs are released) and its runs deleted, so quick runs do not wait for PGlite to record 1,000 results' : 'until all runs have finished'}. ${memoryRounds} round(s), medians.`,
      '',
      ...sections.flatMap((s) => [s, '']),
      '### Findings',
      '',
      ...ENGINE_FINDINGS,
    ].join('\n');
    return { markdown, summary };
  } finally {
    for (const m of models.values()) await m.stop();
    for (const b of backends) await b.cleanup().catch(() => undefined);
  }
}

/** What limits the engine's numbers (measured while the engine was being tuned; see docs/benchmarks.md). */
const ENGINE_FINDINGS = [
  "- **A run's path.** A free place is taken by a claim: one round trip (a batch of three statements, `claimRuns`) picks the runs by the fair ranking, takes a lock for each organization picked (not a cluster-wide one), claims them and returns each run with its task, skills, sources and organization; then the model is called. A run made by Run now in the same process wakes its worker at the commit, ahead of the NOTIFY. Recording the result does not hold the place: the next claim starts as soon as the model has answered, and the worker's usage writes and run ends are recorded several per round trip when they arrive faster than batches complete, each batch one round trip that runs its statements in one transaction, planned once (`Db.batch`: on PostgreSQL one pipeline of the extended protocol, on the embedded database one call of `svc_batch`; `worker/run-writes.ts`): 1.4 statements per run where there were 4.35 (3,000 instant runs at concurrency 8). A Run now that nothing could refuse (no run in flight, no cost or run limit) is created in one round trip as well. With a 100 ms model at the default concurrency the service reaches 0.80–0.88× of the HTTP-only ceiling from one full run to the next on this machine; with an instant model, see the peers part for what a run costs beside the job queues.",
  "- **Memory on PGlite includes the database.** An embedded worker's RSS holds the whole database server: its shared memory (set up, and so resident, in the WebAssembly memory: `shared_buffers` 64 MB here, see `src/db/pglite.ts`; PostgreSQL's default 128 MB cost 50–65 MB more) and the WebAssembly code. On PostgreSQL that memory belongs to the server's processes and is not counted.",
  "- **What 1,000 runs in flight add is mostly the JS heap's young generation.** The objects of the runs themselves (HTTP connection, request, stream and abort state) are about 40 KB a run in the old generation; starting 1,000 at once makes V8 double its young generation to its maximum (64 → 128 MB committed), which is most of the rest. `npm start` caps it with `--max-semi-space-size=32`: with 1,000 runs in flight, 504 → 450 MB on PGlite and 283 → 258 MB on PostgreSQL (one run each, same machine); 16 MB saved another 30–50 MB but cost API requests 10–20% of their throughput.",
  "- **WebAssembly stays with V8's baseline compiler.** By default V8 compiles PGlite's hot WebAssembly functions again with its optimising compiler after a few hundred queries, and one of them (105 KB of code) takes about 600 MB of compiler memory for half a second, once per process: the peak of an embedded process was 775–867 MB whatever its load, and when the compile fell while the 1,000 runs were in flight they read 865 MB. `npm start` runs Node with `--liftoff-only` (V8 keeps its baseline code): measured in this part (memory row, one run each, same machine), idle 286 → 224 MB, 1,000 in flight 416–865 → 359 MB, peak 775–867 → 371 MB; an embedded service's first start (initdb and migrations) peaked at 1,152–1,168 MB and now 708 MB, and a start on an existing database went from 807–811 to 314 MB. Speed: instant runs at concurrency 4 on PGlite 273–312 runs/s instead of 166–232 (short processes no longer share the two cores with the compiler); the API bench on PGlite, 3 rounds each, GET 2,353–2,558 req/s against 2,278–2,646 and the list 771–858 against 811–903 (within 5%). On PostgreSQL the flag changes nothing measurable (idle worker RSS and start-up time, 3 starts each).",
];

async function workerChild(): Promise<void> {
  const config = loadConfig(process.env);
  const concurrency = Number(process.env.BENCH_WORKER_CONCURRENCY);
  if (Number.isInteger(concurrency) && concurrency > 0) config.worker.concurrency = concurrency;
  await runServer(config);
}

if (process.argv[1] && resolve(process.argv[1]) === SELF && process.argv[2] === 'worker-child') {
  await workerChild();
}
