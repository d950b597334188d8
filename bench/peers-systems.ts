// The four systems of the peers benchmark behind one interface: the service and its three
// peers, each on a database (or Redis key prefix) of its own, with what the bench does to them:
// start a worker process, add one job, queue many, count what is left, clean up.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Db } from '../src/db/db.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { insertRun } from '../src/db/sql/runs.ts';
import { newId } from '../src/lib/ids.ts';
import {
  type Child,
  callJson,
  createDatabase,
  createPaidOrganization,
  newSecretKey,
  serviceEnv,
  startServiceProcess,
  weeklyTaskBody,
} from './baselines.ts';
import { startPeerWorker } from './peers-spawn.ts';
import { type PeerName, probePrompt, TASK } from './peers-worker.ts';

export type SystemName = 'service' | PeerName;

export interface StartOptions {
  concurrency: number;
  modelUrl: string;
  /** Markers of jobs due at every minute (peers only). */
  cronMarkers?: string[];
  /** The service: SVC_ROLE (default: unset, all roles, as `npm start` runs it). */
  roles?: string;
}

export interface BenchSystem {
  name: SystemName;
  /** On PostgreSQL (BullMQ is on Redis: reported for reference). */
  postgres: boolean;
  start(o: StartOptions): Promise<Child>;
  /** One job whose model call carries `probe:<marker>`, the way a user of the system adds one. */
  enqueue(marker: string): Promise<void>;
  /** `n` jobs queued at once (bulk). */
  enqueueMany(n: number): Promise<void>;
  /** Jobs not yet completed. */
  remaining(): Promise<number>;
  /** PIDs of the PostgreSQL backends serving this system's database (for CPU). */
  backendPids(): Promise<number[]>;
  /** The service: makes the tasks of `markers` due at `at` (its scheduler knows any time, not only minutes). */
  armSlot?(markers: string[], at: Date): Promise<void>;
  /** Removes what the slot measure's processes left scheduled (pg-boss, BullMQ keep their schedules). */
  clearSchedules?(): Promise<void>;
  /** Marker prefix of this system's probes. */
  prefix: string;
  cleanup(): Promise<void>;
}

async function backendPidsOf(sql: pg.Client, database: string): Promise<number[]> {
  const { rows } = await sql.query<{ pid: number }>(
    'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
    [database],
  );
  return rows.map((r) => r.pid);
}

async function countOf(sql: pg.Client, query: string, params: unknown[] = []): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(query, params);
  return rows[0]?.n ?? 0;
}

/**
 * The service on a fresh database: organizations and one task through the API of a service
 * process (which also migrates), the task copied in SQL to `tasks` tasks (like bench/engine.ts),
 * each with its own marker in the prompt; none due until a measure makes some due.
 */
export async function serviceSystem(
  postgresUrl: string,
  bulkTasks: number,
  slotTasks: number,
): Promise<BenchSystem> {
  const tasks = bulkTasks + slotTasks;
  const created = await createDatabase(postgresUrl, 'svc_bench_peers_service');
  const database = new URL(created.url).pathname.slice(1);
  const secretKey = newSecretKey();
  const env = { databaseUrl: created.url };
  const organizations: { organizationId: string; apiKey: string; taskId: string }[] = [];
  const api = await startServiceProcess(serviceEnv(env, secretKey, { SVC_ROLE: 'api' }));
  try {
    for (let i = 0; i < 4; i++) {
      const org = await createPaidOrganization(api.url, `Peers ${i}`);
      const task = await callJson<{ id: string }>(`${api.url}/api/svc/tasks`, {
        method: 'POST',
        auth: org.apiKey,
        body: weeklyTaskBody(org.organizationId, 0),
        expect: 201,
      });
      organizations.push({ ...org, taskId: task.id });
    }
  } finally {
    await api.stop();
  }
  const db: Db = await openPostgres(created.url, 2, () => undefined);
  const sql = new pg.Client({ connectionString: created.url, application_name: 'svc-bench-peers' });
  await sql.connect();
  // Task n belongs to organization n % 4 and carries marker svc-n; the four first tasks are removed.
  const list: { id: string; organizationId: string; apiKey: string }[] = [];
  await db.transaction(async (tx) => {
    for (const [o, org] of organizations.entries()) {
      const rows = await tx.query<{ id: string; g: number }>(
        `INSERT INTO tasks
         SELECT (jsonb_populate_record(t, jsonb_build_object('id', gen_random_uuid(), 'name', t.name || ' #' || g,
                  'prompt', $3 || g, 'next_run_at', now() + interval '300 days'))).*
           FROM tasks t CROSS JOIN generate_series($4::int, $2::int - 1, 4) g
          WHERE t.id = $1
         RETURNING id, split_part(prompt, 'probe:svc-', 2)::int AS g`,
        [org.taskId, tasks, probePrompt('svc-'), o],
      );
      for (const r of rows) list[r.g] = { id: r.id, organizationId: org.organizationId, apiKey: org.apiKey };
      await tx.query('DELETE FROM tasks WHERE id = $1', [org.taskId]);
    }
  });
  let nextTask = 0;
  /** The process under measure: run now goes through its API. */
  let serviceUrl = '';
  const take = () => {
    const t = list[nextTask++ % bulkTasks];
    if (!t) throw new Error('no task');
    return t;
  };
  return {
    name: 'service',
    postgres: true,
    prefix: 'svc-',
    async armSlot(markers, at) {
      const ids = markers.map((m) => list[Number(m.replace('svc-', ''))]?.id);
      await sql.query('UPDATE tasks SET next_run_at = $2 WHERE id = ANY($1::uuid[])', [ids, at]);
      await sql.query("SELECT pg_notify('svc_tasks', '')");
    },
    async start(o) {
      const child = await startServiceProcess(
        serviceEnv(env, secretKey, {
          SVC_MODEL_BASE_URL: o.modelUrl,
          SVC_MODEL_API_KEY: 'sk-bench-model-key',
          SVC_WORKER_CONCURRENCY: String(o.concurrency),
          SVC_ORG_CONCURRENCY: String(Math.max(2, o.concurrency)),
          ...(o.roles && { SVC_ROLE: o.roles }),
        }),
      );
      // Run now goes to the process with the API (a process with other roles is only measured idle).
      if (!o.roles) serviceUrl = child.url;
      return child;
    },
    // Run now, as a user does: the API call of the organization's key (the service under
    // measure serves the API too: `npm start`'s default roles).
    async enqueue(marker) {
      const t = list[Number(marker.replace('svc-', ''))];
      if (!t) throw new Error(`no task for ${marker}`);
      await callJson(`${serviceUrl}/api/svc/tasks/${t.id}/run`, {
        method: 'POST',
        auth: t.apiKey,
        expect: 202,
      });
    },
    async enqueueMany(n) {
      await db.transaction(async (tx) => {
        for (let i = 0; i < n; i++) {
          const t = take();
          await insertRun(tx, {
            id: newId(),
            organizationId: t.organizationId,
            taskId: t.id,
            slotAt: null,
            trigger: 'manual',
            now: new Date(),
          });
        }
        await tx.query("SELECT pg_notify('svc_runs', '')");
      });
    },
    remaining: () =>
      countOf(sql, "SELECT count(*)::int AS n FROM runs WHERE status IN ('pending', 'running')"),
    backendPids: () => backendPidsOf(sql, database),
    async cleanup() {
      await sql.end().catch(() => undefined);
      await db.close().catch(() => undefined);
      await created.drop();
    },
  };
}

export async function graphileWorkerSystem(postgresUrl: string): Promise<BenchSystem> {
  const created = await createDatabase(postgresUrl, 'svc_bench_peers_gw');
  const database = new URL(created.url).pathname.slice(1);
  const { makeWorkerUtils } = await import('graphile-worker');
  const utils = await makeWorkerUtils({ connectionString: created.url });
  await utils.migrate();
  const sql = new pg.Client({ connectionString: created.url });
  await sql.connect();
  let n = 0;
  return {
    name: 'graphile-worker',
    postgres: true,
    prefix: 'gw-',
    start: (o) =>
      startPeerWorker('graphile-worker', {
        url: created.url,
        modelUrl: o.modelUrl,
        concurrency: o.concurrency,
        queue: '',
        ...(o.cronMarkers && { cronMarkers: o.cronMarkers }),
      }),
    async enqueue(marker) {
      await utils.addJob(TASK, { prompt: probePrompt(marker) });
    },
    async enqueueMany(count) {
      await utils.addJobs(
        Array.from({ length: count }, () => ({
          identifier: TASK,
          payload: { prompt: probePrompt(`gw-bulk-${n++}`) },
        })),
      );
    },
    remaining: () => countOf(sql, 'SELECT count(*)::int AS n FROM graphile_worker._private_jobs'),
    backendPids: () => backendPidsOf(sql, database),
    async cleanup() {
      await Promise.resolve(utils.release()).catch(() => undefined);
      await sql.end().catch(() => undefined);
      await created.drop();
    },
  };
}

export async function pgBossSystem(postgresUrl: string): Promise<BenchSystem> {
  const created = await createDatabase(postgresUrl, 'svc_bench_peers_pgboss');
  const database = new URL(created.url).pathname.slice(1);
  const { PgBoss } = await import('pg-boss');
  // The bench's own instance only adds jobs: no maintenance, no schedules of its own.
  const boss = new PgBoss({ connectionString: created.url, supervise: false, schedule: false });
  boss.on('error', () => undefined);
  await boss.start();
  const queue = 'model_call';
  await boss.createQueue(queue, { notify: true });
  const sql = new pg.Client({ connectionString: created.url });
  await sql.connect();
  let n = 0;
  return {
    name: 'pg-boss',
    postgres: true,
    prefix: 'boss-',
    start: (o) =>
      startPeerWorker('pg-boss', {
        url: created.url,
        modelUrl: o.modelUrl,
        concurrency: o.concurrency,
        queue,
        ...(o.cronMarkers && { cronMarkers: o.cronMarkers }),
      }),
    async enqueue(marker) {
      await boss.send(queue, { prompt: probePrompt(marker) });
    },
    // A schedule is kept in the database: a later worker would go on sending its jobs each minute.
    async clearSchedules() {
      for (const s of await boss.getSchedules(queue)) await boss.unschedule(queue, s.key);
    },
    async enqueueMany(count) {
      await boss.insert(
        queue,
        Array.from({ length: count }, () => ({ data: { prompt: probePrompt(`boss-bulk-${n++}`) } })),
      );
    },
    remaining: () =>
      countOf(
        sql,
        "SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state IN ('created', 'retry', 'active')",
        [queue],
      ),
    backendPids: () => backendPidsOf(sql, database),
    async cleanup() {
      await boss.stop({ graceful: false }).catch(() => undefined);
      await sql.end().catch(() => undefined);
      await created.drop();
    },
  };
}

/** BullMQ on Redis (`redisUrl`), under a key prefix of its own, removed afterwards. */
export async function bullmqSystem(redisUrl: string): Promise<BenchSystem> {
  const { Queue } = await import('bullmq');
  const prefix = `svc-bench-peers-${process.pid}-${randomBytes(4).toString('hex')}`;
  const u = new URL(redisUrl);
  const connection = { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null };
  const queue = new Queue(prefix, { connection, prefix });
  await queue.waitUntilReady();
  let n = 0;
  return {
    name: 'bullmq',
    postgres: false,
    prefix: 'bull-',
    start: (o) =>
      startPeerWorker('bullmq', {
        url: redisUrl,
        modelUrl: o.modelUrl,
        concurrency: o.concurrency,
        queue: prefix,
        ...(o.cronMarkers && { cronMarkers: o.cronMarkers }),
      }),
    async enqueue(marker) {
      await queue.add(TASK, { prompt: probePrompt(marker) });
    },
    // A job scheduler keeps its next job delayed in the queue, which would never be drained.
    async clearSchedules() {
      for (const s of await queue.getJobSchedulers()) if (s.key) await queue.removeJobScheduler(s.key);
      await queue.drain(true);
    },
    async enqueueMany(count) {
      await queue.addBulk(
        Array.from({ length: count }, () => ({
          name: TASK,
          data: { prompt: probePrompt(`bull-bulk-${n++}`) },
        })),
      );
    },
    async remaining() {
      const c = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized');
      return Object.values(c).reduce((s, v) => s + v, 0);
    },
    backendPids: async () => [],
    async cleanup() {
      for (const s of await queue.getJobSchedulers()) if (s.key) await queue.removeJobScheduler(s.key);
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
    },
  };
}
