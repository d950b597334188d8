// What durable commits cost the embedded database (SVC_EMBEDDED_FSYNC, src/db/pglite-disk.ts):
// the same measurements with fsync on (the default) and off, interleaved, on one data directory
// per measurement and mode:
// - commits: one process opens the database and runs small INSERT transactions one after another;
// - task creates: POST /api/svc/tasks from 16 concurrent clients against an api process;
// - runs: a worker process drains pending on-demand runs against an instant model server.
//
//   npm run bench -- --only=durability [--quick]   as a part of the report
//   node bench/durability.ts [--quick]              prints this part's section only
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PartOptions, PartResult } from './api.ts';
import {
  callJson,
  createPaidOrganization,
  fmt,
  mapConcurrent,
  median,
  newSecretKey,
  progress,
  serviceEnv,
  sleep,
  startServiceProcess,
  table,
  weeklyTaskBody,
} from './baselines.ts';
import { startModelServer } from './scheduler-pg.ts';
import { durabilitySizes } from './sizes.ts';

const SELF = fileURLToPath(import.meta.url);
const MODES = ['on', 'off'] as const;
type Mode = (typeof MODES)[number];
const CREATE_CONCURRENCY = 16;

interface CommitResult {
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/** In a child process: `n` one-row INSERT commits, one after another; prints the figures. */
async function commitChild(dataDir: string, mode: Mode, n: number): Promise<void> {
  const { openPglite } = await import('../src/db/pglite.ts');
  const db = await openPglite(dataDir, { durable: mode === 'on' });
  await db.exec('CREATE TABLE bench_commits (id bigserial PRIMARY KEY, v text NOT NULL)');
  for (let i = 0; i < 50; i++) await db.query('INSERT INTO bench_commits (v) VALUES ($1)', ['warm-up']);
  const latencies: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    await db.query('INSERT INTO bench_commits (v) VALUES ($1)', [`row ${i}`]);
    latencies.push(performance.now() - s);
  }
  const seconds = (performance.now() - t0) / 1000;
  await db.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  const result: CommitResult = { perSecond: n / seconds, p50Ms: at(0.5), p99Ms: at(0.99) };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

async function measureCommits(mode: Mode, n: number): Promise<CommitResult> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-bench-durability-'));
  try {
    const child = spawn(process.execPath, [SELF, 'commit-child', join(dir, 'data'), mode, String(n)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    if (code !== 0) throw new Error(`commit child exited with ${code}: ${err}`);
    return JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as CommitResult;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function finishedRuns(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^svc_worker_runs_finished_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
  return n;
}

/**
 * Task creates/s through an api process, then runs/s of a worker process draining one pending
 * run per created task (inserted in SQL between the two, as the engine benchmark does).
 */
async function measureService(
  mode: Mode,
  tasks: number,
  modelUrl: string,
): Promise<{ createsPerSecond: number; runsPerSecond: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-bench-durability-'));
  const backend = { dataDir: join(dir, 'data') };
  const secretKey = newSecretKey();
  const fsync = { SVC_EMBEDDED_FSYNC: mode === 'on' ? 'true' : 'false' };
  try {
    const api = await startServiceProcess(serviceEnv(backend, secretKey, { SVC_ROLE: 'api', ...fsync }));
    let createsPerSecond: number;
    let ids: string[];
    let organizationId: string;
    try {
      const org = await createPaidOrganization(api.url, 'Durability');
      organizationId = org.organizationId;
      const t0 = performance.now();
      ids = await mapConcurrent(
        Array.from({ length: tasks }, (_, i) => i),
        CREATE_CONCURRENCY,
        async (i) =>
          (
            await callJson<{ id: string }>(`${api.url}/api/svc/tasks`, {
              method: 'POST',
              auth: org.apiKey,
              body: weeklyTaskBody(org.organizationId, i),
              expect: 201,
            })
          ).id,
      );
      createsPerSecond = tasks / ((performance.now() - t0) / 1000);
    } finally {
      await api.stop();
    }

    const { openPglite } = await import('../src/db/pglite.ts');
    const { insertRun } = await import('../src/db/sql/runs.ts');
    const { newId } = await import('../src/lib/ids.ts');
    const db = await openPglite(backend.dataDir, { durable: mode === 'on' });
    const runIds = await db.transaction(async (tx) => {
      const out: string[] = [];
      for (const taskId of ids) {
        const run = await insertRun(tx, {
          id: newId(),
          organizationId,
          taskId,
          slotAt: null,
          trigger: 'manual',
          now: new Date(),
        });
        out.push(run.id);
      }
      return out;
    });
    await db.close();

    const worker = await startServiceProcess(
      serviceEnv(backend, secretKey, {
        SVC_ROLE: 'worker',
        SVC_MODEL_BASE_URL: modelUrl,
        SVC_MODEL_API_KEY: 'sk-bench-model-key',
        // One organization: let it use the whole default worker concurrency (4).
        SVC_ORG_CONCURRENCY: '4',
        ...fsync,
      }),
    );
    try {
      const deadline = Date.now() + 300_000;
      while ((await finishedRuns(worker.url)) < runIds.length) {
        if (Date.now() > deadline) throw new Error('the worker did not finish its runs in time');
        await sleep(100);
      }
    } finally {
      await worker.stop();
    }
    const check = await openPglite(backend.dataDir, { durable: mode === 'on' });
    try {
      const [row] = await check.query<{ completed: number; first: Date; last: Date }>(
        `SELECT count(*) FILTER (WHERE status = 'completed')::int AS completed,
                min(started_at) AS first, max(completed_at) AS last
           FROM runs WHERE id = ANY($1::uuid[])`,
        [runIds],
      );
      if (!row || row.completed !== runIds.length)
        throw new Error(`runs not completed: ${JSON.stringify(row)}`);
      return { createsPerSecond, runsPerSecond: row.completed / ((+row.last - +row.first) / 1000) };
    } finally {
      await check.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchDurability(options: Pick<PartOptions, 'quick'>): Promise<PartResult> {
  const { rounds, commits, tasks } = durabilitySizes(options.quick);
  const results: Record<Mode, { commits: CommitResult[]; creates: number[]; runs: number[] }> = {
    on: { commits: [], creates: [], runs: [] },
    off: { commits: [], creates: [], runs: [] },
  };
  const model = await startModelServer();
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const mode of MODES) {
        progress(`durability: round ${round}, fsync ${mode}`);
        results[mode].commits.push(await measureCommits(mode, commits));
        const service = await measureService(mode, tasks, model.url);
        results[mode].creates.push(service.createsPerSecond);
        results[mode].runs.push(service.runsPerSecond);
      }
    }
  } finally {
    await model.proc.stop();
  }
  const m = (mode: Mode, pick: (r: CommitResult) => number) => median(results[mode].commits.map(pick));
  const figures = {
    commitsPerSecond: { on: m('on', (r) => r.perSecond), off: m('off', (r) => r.perSecond) },
    commitP50Ms: { on: m('on', (r) => r.p50Ms), off: m('off', (r) => r.p50Ms) },
    commitP99Ms: { on: m('on', (r) => r.p99Ms), off: m('off', (r) => r.p99Ms) },
    createsPerSecond: { on: median(results.on.creates), off: median(results.off.creates) },
    runsPerSecond: { on: median(results.on.runs), off: median(results.off.runs) },
  };
  const row = (label: string, f: { on: number; off: number }) => [
    label,
    fmt(f.on),
    fmt(f.off),
    fmt(f.on / f.off),
  ];
  const markdown = [
    '## Embedded database durability (PGlite)',
    '',
    `The embedded database with each commit waiting for the disk (\`SVC_EMBEDDED_FSYNC=true\`, the default: fsync on, the WAL written with O_DSYNC, fsync passed through to the OS) against without (\`false\`: PGlite's own fsync=off). Commits: ${commits} one-row INSERT transactions one after another in one process (after 50 unmeasured). Task creates: ${tasks} POSTs from ${CREATE_CONCURRENCY} concurrent clients to an api process. Runs: a worker process (default concurrency 4) drains one pending run per created task against an instant model server; runs/s is completed runs over the span from the first start to the last completion. ${rounds} round(s), modes interleaved, medians.`,
    '',
    table(
      ['measurement', 'fsync on (default)', 'fsync off', 'on / off'],
      [
        row('commits/s', figures.commitsPerSecond),
        row('commit p50 (ms)', figures.commitP50Ms),
        row('commit p99 (ms)', figures.commitP99Ms),
        row('task creates/s', figures.createsPerSecond),
        row('runs/s', figures.runsPerSecond),
      ],
    ),
  ].join('\n');
  const summary: Record<string, number> = {};
  for (const [key, f] of Object.entries(figures)) {
    summary[`durability.pglite.${key}.on`] = f.on;
    summary[`durability.pglite.${key}.off`] = f.off;
  }
  return { markdown, summary };
}

if (process.argv[1] === SELF) {
  if (process.argv[2] === 'commit-child') {
    await commitChild(process.argv[3] ?? '', (process.argv[4] ?? 'on') as Mode, Number(process.argv[5]));
  } else {
    const result = await benchDurability({ quick: process.argv.includes('--quick') });
    process.stdout.write(`${result.markdown}\n`);
  }
}
