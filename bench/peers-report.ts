// The peers part's section of docs/benchmarks.md and its summary figures (the targets table of
// bench/run.ts reads them): each measure per system, and the ratio of the service to the best
// PostgreSQL peer with its goal and status.
import { readFileSync } from 'node:fs';
import type { PartResult } from './api.ts';
import { fmt, median, table } from './baselines.ts';
import type { ThroughputResult } from './peers-measures.ts';
import type { PeerSizes } from './sizes.ts';

/**
 * The roles of the service's processes measured idle beside `npm start`'s default (all roles):
 * a worker process, the like of a peer's worker (the goal's figure), and one that also
 * schedules, as a Graphile Worker process with a crontab does.
 */
export const SERVICE_IDLE_ROLES = ['worker', 'scheduler,worker'];

export interface PeerResults {
  sizes: PeerSizes;
  /** By system: enqueue → start per probe, ms, pooled over the rounds. */
  latencies: Map<string, number[]>;
  /** By system: its measured worker process (the service: all roles). */
  idleRss: Map<string, number[]>;
  /** The service's processes with SERVICE_IDLE_ROLES, by SVC_ROLE. */
  serviceIdleRss: Map<string, number[]>;
  queuedRss: Map<string, number[]>;
  /** By `<system>.<row key>`: one per round. */
  throughput: Map<string, ThroughputResult[]>;
  /** By row key: model-only calls/s, one per round. */
  ceilings: Map<string, number[]>;
  /** By system: slot → start per job, ms, pooled over the rounds. */
  slots: Map<string, number[]>;
  redis: boolean;
}

const LABEL: Record<string, string> = {
  service: 'service',
  'graphile-worker': 'Graphile Worker',
  'pg-boss': 'pg-boss',
  bullmq: 'BullMQ (Redis)',
};
const PG_PEERS = ['graphile-worker', 'pg-boss'];

/** Nearest-rank percentile; NaN (never started) counts as later than everything. */
function pct(values: number[] | undefined, q: number): number {
  if (!values?.length) return Number.NaN;
  const v = values.map((x) => (Number.isNaN(x) ? Number.POSITIVE_INFINITY : x)).sort((a, b) => a - b);
  return v[Math.max(1, Math.ceil(q * v.length)) - 1] ?? Number.NaN;
}

function version(name: string): string {
  try {
    const url = new URL(`../node_modules/${name}/package.json`, import.meta.url);
    return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

const ms = (n: number) => (n === Number.POSITIVE_INFINITY ? 'not started' : `${fmt(n)} ms`);
const mb = (n: number) => `${fmt(n / 2 ** 20)} MB`;
const x = (n: number) => `${fmt(n, 2)}×`;
const status = (ok: boolean | undefined) => (ok === undefined ? 'not measured' : ok ? 'met' : 'MISSED');

/** The best PostgreSQL peer's value: the lowest (lower is better) or the highest. */
function best(values: Map<string, number>, lowerIsBetter: boolean): [string, number] | undefined {
  let out: [string, number] | undefined;
  for (const p of PG_PEERS) {
    const v = values.get(p);
    if (v === undefined || !Number.isFinite(v)) continue;
    if (!out || (lowerIsBetter ? v < out[1] : v > out[1])) out = [p, v];
  }
  return out;
}

export function peersMarkdown(r: PeerResults, systems: string[]): PartResult {
  const summary: Record<string, number> = {};
  const targets: string[][] = [];
  const measures: string[][] = [];
  /** One measure: a value per system, its ratio to the best PostgreSQL peer, goal and status. */
  const measure = (
    key: string,
    label: string,
    values: Map<string, number>,
    show: (n: number) => string,
    o: { lowerIsBetter: boolean; goal?: number; against?: string },
  ) => {
    const b = o.against
      ? ([o.against, values.get(o.against) ?? Number.NaN] as [string, number])
      : best(values, o.lowerIsBetter);
    const service = values.get('service');
    const ratio = b && service !== undefined ? service / b[1] : Number.NaN;
    summary[`peers.${key}.service`] = service ?? Number.NaN;
    summary[`peers.${key}.ratio`] = ratio;
    const ok =
      o.goal === undefined || !Number.isFinite(ratio)
        ? undefined
        : o.lowerIsBetter
          ? ratio <= o.goal
          : ratio >= o.goal;
    measures.push([
      label,
      ...systems.map((s) => show(values.get(s) ?? Number.NaN)),
      b ? (LABEL[b[0]] ?? b[0]) : 'n/a',
      x(ratio),
    ]);
    targets.push([
      label,
      Number.isFinite(ratio)
        ? `${x(ratio)} (${show(service ?? Number.NaN)} vs ${show(b?.[1] ?? Number.NaN)}, ${LABEL[b?.[0] ?? ''] ?? ''})`
        : 'n/a',
      o.goal === undefined ? '— (reported)' : `${o.lowerIsBetter ? '≤' : '≥'} ${o.goal}×`,
      o.goal === undefined ? '—' : status(ok),
    ]);
  };
  const per = (f: (s: string) => number) => new Map(systems.map((s) => [s, f(s)]));

  measure(
    'enqueue.p50',
    'enqueue → start, light load, p50',
    per((s) => pct(r.latencies.get(s), 0.5)),
    ms,
    { lowerIsBetter: true, goal: 1 },
  );
  measure(
    'enqueue.p99',
    'enqueue → start, light load, p99',
    per((s) => pct(r.latencies.get(s), 0.99)),
    ms,
    { lowerIsBetter: true, goal: 1 },
  );
  measure(
    'slot.p50',
    'slot → start, 20 due at once, p50',
    per((s) => pct(r.slots.get(s), 0.5)),
    ms,
    {
      lowerIsBetter: true,
      goal: 1,
      against: 'graphile-worker',
    },
  );
  measure(
    'slot.max',
    'slot → start, 20 due at once, max',
    per((s) => pct(r.slots.get(s), 1)),
    ms,
    {
      lowerIsBetter: true,
      goal: 1,
      against: 'graphile-worker',
    },
  );
  for (const row of r.sizes.rows) {
    const rps = per((s) => median((r.throughput.get(`${s}.${row.key}`) ?? []).map((t) => t.runsPerSecond)));
    const model = row.delayMs ? `${row.delayMs} ms model` : 'instant model';
    measure(
      `rps.${row.key}`,
      `runs/s, ${fmt(row.units)} units, ${model}, concurrency ${row.concurrency}`,
      rps,
      (n) => `${fmt(n)}/s`,
      {
        lowerIsBetter: false,
        goal: row.delayMs ? undefined : 1,
      },
    );
    if (row.delayMs) {
      const ceiling = median(r.ceilings.get(row.key) ?? []);
      const service = rps.get('service') ?? Number.NaN;
      summary[`peers.ceiling.${row.key}`] = ceiling;
      summary[`peers.ceilingRatio.${row.key}`] = service / ceiling;
      targets.push([
        `runs/s, ${model}, concurrency ${row.concurrency}: service vs the model-only ceiling`,
        `${x(service / ceiling)} (${fmt(service)} vs ${fmt(ceiling)}/s)`,
        '≥ 0.95×',
        status(Number.isFinite(service / ceiling) ? service / ceiling >= 0.95 : undefined),
      ]);
    }
    const cpu = per((s) => {
      const t = r.throughput.get(`${s}.${row.key}`) ?? [];
      return median(t.map((v) => v.processCpuMs + v.databaseCpuMs));
    });
    measure(
      `cpu.${row.key}`,
      `CPU ms per run (process + database), ${model}, concurrency ${row.concurrency}`,
      cpu,
      (n) => `${fmt(n)} ms`,
      {
        lowerIsBetter: true,
        ...(row.key === 'instant-c8' && { goal: 1 }),
      },
    );
  }
  // Like with like: a peer's process is a worker, so the goal is judged on the service's worker
  // process; `npm start`'s default, which also serves the API, is reported beside it.
  const idle = (service: number) =>
    new Map(systems.map((s) => [s, s === 'service' ? service : median(r.idleRss.get(s) ?? [])]));
  measure(
    'rss.idleWorker',
    'RSS idle, worker process (the service: `SVC_ROLE=worker`)',
    idle(median(r.serviceIdleRss.get('worker') ?? [])),
    mb,
    { lowerIsBetter: true, goal: 1.25, against: 'graphile-worker' },
  );
  measure(
    'rss.idleSchedulerWorker',
    'RSS idle, the service with `SVC_ROLE=scheduler,worker`',
    idle(median(r.serviceIdleRss.get('scheduler,worker') ?? [])),
    mb,
    { lowerIsBetter: true, against: 'graphile-worker' },
  );
  measure(
    'rss.idle',
    'RSS idle, the service with all roles (`npm start` default)',
    idle(median(r.idleRss.get('service') ?? [])),
    mb,
    { lowerIsBetter: true, against: 'graphile-worker' },
  );
  measure(
    'rss.queued',
    `RSS with ${fmt(r.sizes.queued)} queued`,
    // The service's process here is the measured one (all roles).
    per((s) => median(r.queuedRss.get(s) ?? [])),
    mb,
    {
      lowerIsBetter: true,
    },
  );

  const cpuRows: string[][] = [];
  for (const row of r.sizes.rows) {
    for (const s of systems) {
      const t = r.throughput.get(`${s}.${row.key}`) ?? [];
      cpuRows.push([
        row.key,
        LABEL[s] ?? s,
        fmt(median(t.map((v) => v.processCpuMs))),
        fmt(median(t.map((v) => v.databaseCpuMs))),
      ]);
    }
  }
  const markdown = [
    '## Peers: the service beside Graphile Worker, pg-boss and BullMQ',
    '',
    `Versions: Graphile Worker ${version('graphile-worker')}, pg-boss ${version('pg-boss')}, BullMQ ${version('bullmq')} with ioredis ${version('ioredis')}${r.redis ? '' : ' (Redis did not answer: BullMQ not measured)'}, the \`openai\` SDK ${version('openai')} in every peer's handler. ${r.sizes.rounds} round(s) (the 100 ms rows and the RSS with jobs queued in the first only; slot → start once; sizes in bench/sizes.ts${r.sizes.slot ? '' : '; a quick run leaves out slot → start, the 100 ms rows, the RSS with jobs queued and BullMQ'}); latencies pooled over the rounds, runs/s, CPU and RSS medians of the rounds; before its runs/s rows each worker process runs ${r.sizes.warmUp} jobs untimed (a fresh process's code is cold, and a worker runs for days: bench/sizes.ts). "Best peer" is the best PostgreSQL peer (Graphile Worker or pg-boss); BullMQ runs on Redis and is shown for reference only. Ratios are the service's figure divided by the best peer's.`,
    '',
    '### Targets',
    '',
    table(['measure', 'service vs best PostgreSQL peer', 'goal', 'status'], targets),
    '',
    '### Every system',
    '',
    table(
      ['measure', ...systems.map((s) => LABEL[s] ?? s), 'best PostgreSQL peer', 'service / best'],
      measures,
    ),
    '',
    table(
      [
        'row',
        'system',
        'CPU ms per run, worker process',
        'CPU ms per run, database (PostgreSQL backends; BullMQ: redis-server)',
      ],
      cpuRows,
    ),
    '',
    ...PEERS_METHOD(r),
    '',
    ...PEERS_FINDINGS,
  ].join('\n');
  return { markdown, summary };
}

const PEERS_METHOD = (r: PeerResults) => [
  '### Method',
  '',
  "- **Same database server, same model.** Each system gets a fresh database on the PostgreSQL server the other parts use (BullMQ a key prefix of its own on the Redis at `BENCH_REDIS_URL`, default `redis://127.0.0.1:6379`), dropped afterwards. Each system's worker runs in a process of its own (the service as `npm start` runs it, all roles, `SVC_WORKER_CONCURRENCY` and `SVC_ORG_CONCURRENCY` set to the concurrency; the peers as `node bench/peers-worker.ts <peer>`), against the same model stand-in (`node bench/baselines.ts model`, the one the engine part uses, in its own process; instant, or answering after 100 ms).",
  "- **The same model call.** Every peer's handler makes one streamed Chat Completions call with usage through the official `openai` SDK over Node's built-in fetch (the SDK's default, and what a handler written on them would use), and reads the answer to its end. The service makes the same request with its own model client (`src/runner/model-client.ts`: the request, the answer's events, the retries the provider SDKs make) over its own transport (`src/runner/model-transport.ts`: `node:http` with keep-alive connections), which cost less CPU per call (findings), and also bounds the answer's bytes. So the HTTP exchange per unit is the same; part of the difference in CPU per run is the service's model client, not its queue.",
  '- **Interleaved.** Every round measures each measure on the service, Graphile Worker, pg-boss and BullMQ in turn, so a busy moment of the shared machine falls on all of them; ratios, not absolute figures, are the result.',
  `- **Enqueue → start** (light load): a worker at concurrency 8, warmed by ${r.sizes.probeWarmUp} jobs added the way its probes are, 8 at a time, untimed and drained (a fresh process runs its code cold: the service's run now, through its HTTP API, took 3.6–3.7 ms to its model request in a fresh process and 2.8–3.0 ms after 1,000, bench/sizes.ts; a system runs for days), then ${r.sizes.probes} jobs added one at a time, ${r.sizes.gapMs} ms apart, each carrying a marker the model stand-in records with the time its request arrived (wall clock, same machine). The service's job is \`POST /api/svc/tasks/{id}/run\` with the organization's API key (one task per probe), which the process's own worker, having free places, claims in the statement batch that creates the run (no NOTIFY and no claim round trip before the start); Graphile Worker's \`addJob\`, pg-boss's \`send\` (queue with \`notify: true\`, instance with \`useListenNotify: true\`), BullMQ's \`Queue.add\`, from the bench process. Time from just before the call to the model request's arrival. The p50 and p99 are nearest-rank over the probes of every round pooled (${r.sizes.probes * r.sizes.rounds}): a pause of a few milliseconds in the system's process (a collection of V8's) lands on one probe in a hundred or so, so the p99 of fewer probes is one such pause more or less (bench/sizes.ts).`,
  `- **Slot → start**: ${SLOT} jobs due at one time, every system's worker running at once (independent processes on independent databases). The peers only know minutes, so their jobs come from their own schedulers at the next minute boundary at least 6 s after the processes are up: Graphile Worker's crontab (${SLOT} lines \`* * * * *\`), pg-boss's \`schedule\` with its cron monitor and cron worker checking every second (the least it allows; by default every 30 and 5 s), BullMQ's \`upsertJobScheduler\`; the service's tasks are made due (\`next_run_at\`, as the scheduler stores a slot) 2 s after its process is up, which is before the peers' minute, so the bursts do not overlap. Measured once per run, between two systems' other measures (nothing else running) when a minute boundary is near, so that the run does not idle for one; the schedules are removed afterwards. Time from the slot to the model request's arrival. Waits at most 40 s after the minute (a job not started by then shows as "not started"). pg-boss sends a schedule's job when its cron monitor next finds the minute due, not at the minute: with its default of every 30 s its figures moved by seconds from run to run (-948 ms in one run, when its jobs started before the minute, and 3,844 ms in the one before, 2026-11-29; 27.5 s on 2026-12-01, which made the measure wait that long), and with a check every second its jobs start about 2 s after the minute (1,946 ms on 2026-12-01); the goal is set against Graphile Worker's crontab.`,
  `- **Runs/s**: the units are queued at once (one transaction: run-now's \`insertRun\` per run for the service, as bench/engine.ts does; \`addJobs\`, \`insert\`, \`addBulk\` for the peers) into an idle worker at the given concurrency; runs/s is units over the span from the first model request received to the moment no unit is left pending or running (polled every 25 ms). The model-only ceiling is the same number of calls at the same concurrency from a process of their own (\`node bench/peers-worker.ts ceiling\`), no queue.`,
  "- **CPU per run**: user + system time from /proc/<pid>/stat of the worker process and of the PostgreSQL backends serving that system's database (pids from `pg_stat_activity`, the bench's own connections left out; BullMQ: the redis-server process), from the end of the enqueue to the end, divided by the units. PostgreSQL's background processes (WAL writer, checkpointer) are not counted for anyone.",
  `- **RSS**: VmRSS from /proc/<pid>/status of the worker process (concurrency 8) after 2 s with nothing to do, and the largest sample (every 50 ms) while ${fmt(r.sizes.queued)} jobs queued at once drain against the instant model. A peer's process is a worker (and, with a crontab or schedule, its scheduler), so the service's idle RSS is read for a worker process (\`SVC_ROLE=worker\`: the goal's figure) and for \`SVC_ROLE=scheduler,worker\` too, both started with the measured all-roles process on the same database and read at the same moment, then stopped before any work; the all-roles process is the one measured with jobs queued.`,
  "- **What the service does per run that the peers don't**: it checks the organization's run limit and cost limit and writes the usage ledger row with the run; it claims fairly across organizations (`SVC_ORG_CONCURRENCY`) under a claim lock with a lease, and renews leases while runs are out; it loads the task's context (task, skills, sources, organization) and builds the prompt; it records the model's usage and cost with the result, queues deliveries for the task's destinations (none here) and keeps slot records (exactly once per slot) for scheduled runs. The peers store a payload and delete (Graphile Worker) or mark (pg-boss, BullMQ) the job. The peers' figures are therefore a floor for work that does less, which is why the goal is to be ahead of them anyway.",
];
/**
 * What moved these measures, measured outside this bench with its own modules (serviceSystem,
 * throughput, the light-load probes) on this machine, idle, interleaved before/after runs.
 */
const PEERS_FINDINGS = [
  '### Findings',
  '',
  "- **Run now is claimed at its creation** when the answering process's worker has a free place (docs/architecture.md, \"Claimed at its creation\"): the statement batch that creates the run also takes the organization's claim lock and claims it, so no NOTIFY, wake-up or claim round trip comes between the commit and the start. Inside the service, request → model request went from about 4.3 ms to 3.2–3.7 ms; enqueue → start as this bench measures it (interleaved runs of 100 probes, old and new code): p50 5.0–5.9 ms against 5.6–7.6 ms before. Since then the insert itself writes the run `running` under the worker's lease, with its context, when a claim would take it (the organization's claim lock taken by the statement before), instead of a pending insert followed by the claim's update: one statement, one row version and its index entries fewer. The batch alone (one connection, 100 run nows 10 ms apart, two alternations with the previous code): median 1.73 and 1.96 ms before, 1.38 and 1.73 ms after; enqueue → start, pooled p50 of 80 probes in two alternations: 5.50 and 5.52 ms before, 5.32 and 5.06 ms after. Where the rest of a run now goes, traced inside the service (40 probes after the first): the request to the route 0.4–0.5 ms, the batch's round trip 1.7–1.9 ms (its commit flushes the WAL), the model SDK from its call to its fetch 0.7–0.9 ms, the fetch to its request written 0.3 ms; the first run after a start takes 50–58 ms, 25 ms of it loading Node's fetch implementation.",
  "- **A claim planned on a drained queue read the whole backlog.** The claim's two statements are planned once per connection and kept until the runs table is analysed again, and autovacuum analyses it when the queue is usually empty. With statistics that say no run is pending, the planner found `runs_pending_idx` (created_at) and `runs_task_in_flight_idx` as cheap as `runs_pending_org_idx`, and read the pending runs through them, filtering by organization: every claim then read the whole backlog, once per organization (auto_explain in this bench's throughput measure: a claim of 6 runs read 969 runs per organization and took 9.8 ms, its pick 8.9 ms; test/run-claim-plans.test.ts: a pick read 18,000 runs for a backlog of 2,000 on both backends). Migration 0026 drops `runs_pending_idx` (no statement needed it), lets only statements about given tasks use `runs_task_in_flight_idx`, and plans the claim without sequential scans (a plan made on small tables read every skill and source of every organization). Measured with this bench's throughput modules (concurrency 8, 2,000 runs, two alternations with the previous code, two rounds each): database CPU per run 1.21, 0.88, 1.07, 0.79 ms before and 0.80, 0.79, 0.78, 0.77 ms after; runs/s 682, 733, 754, 812 before and 851, 803, 880, 821 after; in pg_stat_statements the claim's time per run went from 671 to 255 µs.",
  "- **A run's place goes to the next run when the model's last answer arrives** (an answer without tool calls, no source open), before that answer's usage is written: the next claim and start overlap the recording. With the 100 ms model at concurrency 8 the service went from 0.93× to 0.955–0.964× of the model-only ceiling; instant model, concurrency 8: 733–870 → 841–958 runs/s (later runs 1,000–1,150), concurrency 32: 860 → 1,070–1,270 runs/s; round trips per run (instant, concurrency 8) from 1.4 to 0.91.",
  "- **Fewer, larger write batches, with a run's ends in one statement.** A batch of run writes recorded each end with a statement of its own, and a statement's cost was mostly its start (executor start, plan check, index openings): in pg_stat_statements (concurrency 8, 3,000 runs) the batch function took 991 µs of the database's time per run, 263 µs of it in the ends' statements, 0.66 batches per run. Three changes, each measured with this bench's throughput modules (instant model, 2,000–3,000 runs, alternated with the code before it, one round each): (1) the ends of a batch's runs of distinct tasks in one statement (`recordLockedRunEndsStatement`; a task's second end of the batch in a second one): database CPU per run at concurrency 8 1.06–1.23 ms against 1.26–1.49, runs/s about 5% more, on a slower day of the machine; (2) a run's last answer's usage written in its end's transaction rather than in a batch of its own, the usage statement leaving the run's figures to the end (one row version fewer): concurrency 32, 1,648–1,782 runs/s against 1,494–1,557 and 0.29–0.30 ms of database CPU per run against 0.37–0.38; concurrency 8, no change beyond the spread; (3) one batch in flight where there were two, and up to 32 writes per batch where there were 8 (and at most 1,000,000 characters of outputs): concurrency 8, 1,431–1,436 runs/s against 1,225–1,254 and 0.37–0.38 ms against 0.50–0.52; concurrency 32, 2,031–2,048 against 1,638–1,738 and 0.21–0.22 ms against 0.30–0.31; 100 ms model at concurrency 32, 294–298 runs/s against 295 (the ceiling is 320). One batch in flight with at most 8 writes alone was better at concurrency 8 and worse at 32 (1,501–1,605 runs/s against 1,661–1,685): the batches must be allowed to grow. Write transactions per run went from 0.74–1.06 to 0.66 at concurrency 8 and from 0.36 to 0.15 at 32. Measured, not kept: no `svc_runs` notification after a batch of ends (a single process claims by itself; 2 alternations at concurrency 8 and 32: 1,222–1,284 runs/s against 1,312–1,341, and 1,752–1,786 against 1,733–1,808): nothing to gain, and other processes need it. A run's end now returns only what its writers read of the run, not the output it was sent (no difference here: the stand-in's answers are short).",
  "- **The claim is now the largest database cost per run.** pg_stat_statements after the changes above (concurrency 8, 4,000 runs): the write batches 190 µs of the database's time per run (0.32 calls per run: the ends' statement 62 µs, the usage 36, the locks 6, the notification 3), the claim 180 µs (0.28 calls per run, about 3.6 runs per claim). One claim of 4 runs on a backlog of 3,000, measured alone on one connection (300 claims, each rolled back, backend CPU from /proc): 534 µs, of which the pick 100 µs, the claim statement 334 µs (EXPLAIN ANALYZE: 0.32 ms, of which about 85 µs outside its plan's nodes, the runs' update with its index entries 70 µs, the fair ranking 50 µs, the contexts 64 µs) and the function around them about 100 µs. Most of it is paid per claim, not per run. A claim for fewer than 4 free places while other runs execute now waits one turn of the event loop, so that the places freed by answers read in that turn are claimed together (runs started together end together): alternated with claiming at every freed place, with the 100 ms model at concurrency 32, write transactions per run 0.86 against 1.66, CPU per run (process + database) 1.41 ms against 1.96, runs/s 291 against 295 (one pair); at concurrency 8, 2.08 ms against 3.5, 75 runs/s both (one pair); instant model, concurrency 8, 1,374–1,428 runs/s against 1,265–1,332 (two pairs). A 1 ms timer in place of the turn gave 1.43–1.57 ms against 1.96–2.03 (three pairs, concurrency 32) but cost its millisecond at concurrency 8 (75 runs/s against 76 in two pairs). This run's table: 1.79 ms (concurrency 8) and 1.09 ms (32) with the 100 ms model, against 2.33 and 1.42 in the run before the change. Claiming ahead of free places followed (next finding).",
  "- **Claimed ahead while runs are short** (docs/architecture.md, \"Claimed ahead\"): while a worker's executions take under 50 ms on average, a claim also takes runs beyond its free places (up to twice its concurrency held, at most 32), held and begun the moment a place frees, so a claim takes several runs and no place waits for one. Its cost: a held run is `running` (it counts against `SVC_ORG_CONCURRENCY`) while it waits, and another worker cannot take it; longer runs are never held. Measured with this bench's throughput modules on a machine slower than the one of the findings above (the same code gave 507–643 runs/s at concurrency 8), alternated with the code before it: instant model, concurrency 8, 3,000 runs, 7 pairs: runs/s median 636 against 569, database CPU per run 0.57–0.79 ms against 0.84–1.07, write transactions per run 0.31–0.55 against 0.57–0.79; concurrency 32, two pairs: 792–799 runs/s against 775–802, database CPU 0.42 ms against 0.45–0.48; 100 ms model at concurrency 8 (never held), three pairs: 70–72 runs/s against 71. The byte bound on model answers now reads the body as it is read instead of piping it through a TransformStream: in the worker's CPU profile at concurrency 8 the bound's set-up per answer went from 77 to 23 µs and web streams' share of busy time from 6.7% to 4.6%. On that machine, loading Node's fetch implementation (the first use of `fetch` or `Response`) took 52–57 ms and the first request 29 ms more: a fresh process's first run pays both.",
  "- **Model calls over `node:http` instead of fetch** (`src/runner/model-transport.ts`). In the worker's CPU profile (instant model, concurrency 32), Node's fetch implementation took 22% of the busy time and web streams 5%, more than the `openai` SDK around it (13%): it is written to the WHATWG specification, and most of what that asks (request and response objects, header lists, redirects, CORS modes) is of no use to one POST whose answer is streamed back. The service's model client now gives the SDK a fetch-shaped function over `node:http`/`node:https` with keep-alive connections. The SDK against the stand-in, 8 calls at a time, 3,000 calls, a busy machine: 580–740 µs of CPU per call through fetch against 440–470 µs. This bench's throughput modules, alternated with the code before it: instant model, concurrency 8, 3,000 runs, 3 pairs: worker CPU per run 1.22–1.32 ms against 1.39–1.62, runs/s 631–675 against 575–668; concurrency 32, 4,000 runs, 2 pairs: 0.79–0.88 ms against 1.15–1.18, runs/s 947–1,170 against 853–875; 100 ms model, concurrency 32, 960 runs, 2 pairs: 265–271 runs/s against 253–256, worker CPU per run 1.89–2.03 ms against 2.28–2.42. A prompt's time context is now formatted once per zone and minute (Intl's formatting was about 1% of the worker's CPU). The transport follows no redirect and uses no HTTP proxy (docs/operations.md); the SDK still needs Node's `Headers` and `Response`, so a fresh process still loads the fetch implementation on its first call. Its first version imported `node:http` as an ES module, which reads every export of the module, lazy ones included (`WebSocket` and others load Node's fetch implementation, TLS and HTTP/2): an idle worker's RSS went from 90.1–90.8 MB to 91.5–92.7 MB (three starts each, twice; the full run of this report at that commit showed 92.1 MB, 1.3× Graphile Worker's). The transport now takes `node:http` and, at its first https call, `node:https` with `process.getBuiltinModule`, and `node:zlib` only for a compressed answer: 90.0–90.9 MB.",
  "- **The byte bound on model answers without its TransformStream** (src/runner/capped-response.ts). The pipe's machinery cost 50–100 µs of CPU per streamed answer (2,000 answers of the model stand-in through the SDK, 8 at a time: 260–372 µs per call through the pipe, 209–270 µs without any bound, 205–260 µs with the bound read as the reader asks). A first version of the bound read as the reader asks made the ledger chaos test (test/adversarial/usage-chaos.test.ts on PostgreSQL, four at once beside a busy loop) lose one answer's usage in 2 of 4 runs, and was set aside; the one kept (a pull stream over the source's reader, highWaterMark 0, covered by test/capped-response.test.ts) passed that test 4 of 4 beside a busy loop, also over the model transport above.",
  "- **Where the rest goes.** With the instant model at concurrency 32 the machine is CPU-bound: `perf` over all processes showed the PostgreSQL backends at about 37% of the samples, their executor at 23% (the claim, the end and the usage statements themselves, index insertion 4%, foreign-key triggers 2%), the functions that batch statements (svc_batch, svc_lock_then_query) at 3% beyond the statements they run, commit and WAL flush at 2.5%, socket writes at 3%. The service writes per run what the peers do not (a usage call row, the ledger row, the run's figures, the task's row when it changes, deliveries), and that is where its database CPU per run stays above pg-boss's. Leaving a run's figures to its end when both are in one batch (one row version fewer per run) and one batch of writes in flight instead of two made no difference beyond the spread of the runs while each end was a statement of its own; with the ends in one statement they are kept (above). Every statement batch and claim also looked for its prepared statements in `pg_prepared_statements` (a view that builds a row for each statement the connection prepared, with its whole text): 13–15 µs of the database's time per look, up to four looks per run (pg_stat_statements, concurrency 1); a connection now marks the statements it prepared with a setting of its own (migration 0023), and the looks are gone from the statements' statistics. Measured but not kept: a second claim sent beside the one in flight, for places freed meanwhile (100 ms model, concurrency 32, two alternations of three rounds against the previous code: 0.91–0.94 of the model-only ceiling against 0.86–0.97), and loading Node's fetch implementation when a worker starts, which would take about 25 ms off the first run after a start but add 10.7 MB to an idle worker's RSS.",
  "- **A claim's fixed cost, and the link tables a run without links does not need.** pg_stat_statements (instant model, one worker): at concurrency 8 (3,000 runs) a claim (`svc_lock_then_query`) cost the database about 1.3 ms for 7.3 runs, half of it outside its two statements' execution (their executor start-up and shut-down, the function, the locks), and each write batch about 0.9 ms of the same kind; at concurrency 32 (4,000 runs) a claim took about 30 runs. A worker whose runs are short now holds up to twice its concurrency (at most 32) instead of once, so refill claims take twice as many runs: concurrency 8, 1,000 runs, 4 alternated pairs, 982–1,029 runs/s against 846–979 and database CPU per run 0.39–0.40 ms against 0.45–0.55 (no change at 32). The claim also read each run's skills and sources, and a run's end its delivery targets, from the link tables, whose copies on the task's row (migration 0019) say whether there is anything to read: a task without links, the usual one, costs its run no probe of them; at concurrency 32, per run, the claim's statement 87 → 69 µs and the end's 96 → 84 µs of the database's time, database CPU 0.240–0.255 → 0.228–0.240 ms (3 alternated pairs).",
  "- **Answers read without web streams** (`src/runner/model-transport.ts`): the model transport answered the SDK with a `Response` whose body was a web stream made over the socket's Node stream, and the byte bound wrapped it in another. The SDK reads a body that is async iterable as it is, and reads nothing of an answer but its status, headers, body, `text()` and `json()`: the transport now answers with just that, the body the socket's stream itself read through the bound. This bench's throughput modules, alternated with the code before it, instant model, 3 pairs each: concurrency 32, 3,000 runs: worker CPU per run 0.87/0.98/1.00 ms against 1.05/1.15/1.06, runs/s 1,084/961/938 against 929/886/931; concurrency 8, 2,000 runs: 1.35/1.16/1.26 ms against 1.44/1.43/1.41, runs/s 684/798/732 against 677/674/667. The ledger chaos test (test/adversarial/usage-chaos.test.ts) passed 4 of 4 on PostgreSQL, four at once beside a busy loop.",
  "- **A fresh process's first run** (docs/architecture.md, \"Lazy roles\"): a process without the api role no longer loads TypeBox (the configuration and the model catalog are checked against their schemas as JSON): worker-only idle RSS 89.1–90.4 MB before, 82.9–84.8 MB after (6 starts each, alternated). Part of that room pays for loading Node's fetch classes when the worker starts rather than on the first run's way to the provider: all roles, run now 2 s after start, 3 starts each alternated: the first run's model request arrived 55–62 ms after the request instead of 86–104 ms (the enqueue → start p99 above is that first probe of each round).",
  "- **Model answers keep their headers as Node parsed them** (`AnswerHeaders`, `src/runner/model-transport.ts`): the SDK lists every answer's headers (`entries()`, for its x-request-id) and formats them for its debug log at every request whatever its level, and the transport had copied them into a `Headers`, which is built header by header and sorts its names at each listing. Worker CPU profile, instant model, concurrency 8, 6,000 runs: Node's fetch classes 40.5 → 31.8 µs per run, the transport's own code 22.2 → 16.0; this bench's throughput modules alternated with the code before it, 3 pairs: worker CPU per run 1.10/1.19/1.17 → 1.04/1.18/1.13 ms.",
  "- **A claimed run's task as the run needs it** (`RunTask`, `src/db/sql/run-context.ts`): the claim returned each run's whole task row as JSON (35 columns, four of them timestamps the worker made into dates), of which the executor reads seven. It now builds only those. pg_stat_statements, instant model, concurrency 8, 3,000 runs, 2 alternated pairs: the claim statement's time per run 149.6/155.4 → 133.6/142.5 µs, the claim function's 279.1/290.7 → 254.9/276.6 µs. The worker's `run finished` line, one per run, is now written like the access line, without pino's redaction pass (which parsed its ten paths and cloned the line's object at each call: 11 µs of the worker's CPU per run and about 3 KB of garbage in its CPU and sampling heap profiles).",
  "- **A batch is a pipeline, not a function call** (PostgreSQL; `src/db/pg-statement.ts`, `Db.batch`). A worker's write batches went through `svc_batch` and its claims through `svc_lock_then_query`, PL/pgSQL functions that ran the batch's prepared statements with EXECUTE, their parameters quoted into literals and read back as JSON. The service writes the extended protocol itself, so a batch is now the statements' Bind and Execute messages and one Sync (PostgreSQL runs them in one implicit transaction, rolled back on error), and the claim is a batch of three statements, the pick handed to the locks and the claim in a setting of the transaction. pg_stat_statements, instant model, concurrency 8, 3,000 runs: the statements' time per run went from 682 to 463 µs, but the database's CPU per run only from 0.623–0.637 to 0.560–0.630 ms (4 alternated pairs; `perf` had put the functions' own work at 3% of the samples): what a run costs the database is its statements' work, above all the claim (about 150 µs per run claimed: its update of the runs' rows, non-HOT since the status is in the partial indexes' predicates, and each run's context as JSON) and the ends' statement (150–170 µs per run, at 13 as at 31 runs per batch).",
  "- **Concurrency 32 is a matter of the database's work per run, and of warm code.** A worker measured after 100 jobs ran cold code: at concurrency 32 (instant model, alternated, 2026-11-30), after 100 jobs the service's worker spent 1.07–1.14 ms of CPU per run over the next 1,000 and pg-boss's 1.03–1.06 (the service at 0.88–0.98× of pg-boss's runs/s, 3 pairs); after 1,000 jobs, 0.46 and 0.57 ms over the next 3,000 (1.08–1.11×, 2 pairs: 1,729 and 1,771 runs/s against 1,603 and 1,591), so each worker now runs 500 jobs before its rows (bench/sizes.ts). What stays is the database: 0.29 ms of its CPU per run against pg-boss's 0.18–0.21. pg_stat_statements at concurrency 32 (4,000 runs): the ends' statement 90 µs of the database's time per run (2.9 ms per call of 32 runs), the claim 85 µs (1.15 ms per call of 13.6 runs), the usage statement 39, the pick 15, the lock statement 8; pg-boss's fetch 34 µs per job and its completion 29. Alone on one connection (32 ends per batch, no contention) a batch costs 131–137 µs of wall time per run: its statements' execution 81–92 µs (ends 45–57, usage 27, locks 8), 410 µs per batch whatever its size (the same batch with no rows: executor start-up of the plans, locks on their tables and indexes, a round trip of 76 µs), and the commit. `perf` of that backend: index insertion 24% of its samples (a claim and an end each write a new version of the run's row, and each version an entry in each of the run's 4 to 6 indexes whose predicate it meets: status is in three partial indexes, so neither update can be HOT), index scans about 20%, the statement's deferred work and foreign-key checks 10.5%, the commit 7.6% (fdatasync 5.5%), executor start-up 6.7%, pruning dead row versions 6.7%. Measured and not kept: the queue in a table of its own so that the run's row could be updated HOT (plain SQL, 4,000 runs beside 20,000 ended ones, 7 indexes against 4 plus a queue table of 3, fillfactor 85: the inserts 90 against 106 ms, the claims 78 against 100, the ends 58 against 53: the queue table's own rows cost what the index entries saved); holding up to 64 runs instead of 32 at concurrency 32, for larger claims (3 alternated pairs, 1,718 / 1,686 / 1,396 against 1,641 / 1,681 / 1,381 runs/s, database CPU 0.280–0.307 against 0.285–0.328 ms per run, within the spread; pg_stat_statements in 2 more pairs: 12.0–12.9 runs per claim against 14.9–15.1, since 32 runs executing, 64 held and 32 in the write batch in flight reach the 4 organizations' limit of 32 running each, and the claims are cut by it).",
  "- **The model client without the `openai` SDK** (`src/runner/model-client.ts`, `model-request.ts`, `model-events.ts`). With its HTTP already over `node:http`, the SDK itself was the largest part of the worker's CPU: in the worker's CPU profile (instant model, concurrency 32, 3,000 runs after 1,000) 24.7% of the busy samples were in the SDK's own code (each request's header lists built through `Headers`, the answer's events parsed through several layers of async iterators, a debug line formatted per request whatever the log level), and a sampling heap profile of run now at light load (2,000 run-nows 8 at a time, after 1,000) put 55 KB of the 180 KB allocated per run in it, and 9 KB more in undici's `Headers`. The service now makes the request itself: the JSON body, the Server-Sent Events read line by line, each event's chunk given to the answer's builder, and the retry policy the SDK had (the same statuses, backoff and `Retry-After`, now honoured up to a minute). This bench's throughput modules for the service alone, alternated with the previous commit, 3 pairs: concurrency 8, 2,000 runs, 1,115/1,203/1,152 runs/s against 848/995/883, the worker's CPU per run 0.46/0.39/0.44 ms against 0.72/0.69/0.71; concurrency 32, 3,000 runs, 1,548/1,590/1,640 runs/s against 1,247/1,312/1,254, 0.30/0.29/0.28 ms against 0.55/0.51/0.53. Allocation per run now 113 KB against 180. Enqueue → start, 200 probes after 1,000, 5 alternated pairs: p50 4.01–4.51 ms against 4.13–4.77, the p99 in the spread of both (8.9–15.1 against 8.1–12.4); the all-roles process idle at 118.8–121.6 MB against 122.6–127.9 (a worker no longer loads the SDK, nor Node's fetch classes that it needed).",
];

const SLOT = 20;
