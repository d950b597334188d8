// The scheduler benchmark: how fast tasks due at one slot become runs and start, across service
// processes on PostgreSQL, and what one claim cycle costs as the tasks table grows (PostgreSQL
// and the embedded PGlite). `node bench/scheduler.ts [--quick]` prints the markdown section;
// bench/run.ts imports benchScheduler.
//
// Environment (standalone): BENCH_DATABASE_URL or TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres); BENCH_CPU_PROF=<dir> writes V8 CPU profiles of
// the service processes of the burst scenarios; BENCH_SCHEDULER_ROUNDS overrides the number of
// burst rounds.
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { openPostgres } from '../src/db/postgres.ts';
import {
  type BurstConfig,
  DEFAULT_CONCURRENCY,
  LIGHT_MAX_PER_SLOT,
  LIGHT_SLOTS,
  runScenario,
  type ScenarioResult,
} from './scheduler-burst.ts';
import { type ClaimCycleResult, measureClaimCycle } from './scheduler-claim.ts';
import { createDatabase, fmt, median, postgresReachable, startModelServer } from './scheduler-pg.ts';
import { schedulerSizes } from './sizes.ts';

export interface SchedulerBenchOptions {
  quick: boolean;
  postgresUrl: string | undefined;
}

interface Plan {
  burstTasks: number;
  organizations: number;
  configs: BurstConfig[];
  burstRounds: number;
  burstDeadlineMs: number;
  claimTotalsPg: number[];
  claimTotalsPglite: number[];
  claimTicks: number;
  due: number;
}

function planFor(quick: boolean): Plan {
  const envRounds = Number(process.env.BENCH_SCHEDULER_ROUNDS);
  const sizes = schedulerSizes(quick);
  return { ...sizes, burstRounds: envRounds > 0 ? envRounds : sizes.burstRounds };
}

/** A progress line on stderr (the markdown goes to stdout). */
function progress(message: string): void {
  process.stderr.write(`[bench scheduler] ${message}\n`);
}

/**
 * A claim cycle with a fixed number of due tasks is "flat" when it costs the same, within the
 * noise between rounds at one size (10%), however many tasks the table holds.
 * Growth of SCAN_BAR or more across the sizes measured would mean the due query reads the table.
 */
const FLAT_GROWTH = 1.1;
const SCAN_BAR = 1.5;
/** `1proc`, `3proc`, `3proc.c32`, `1proc.schedulerOnly`: the summary key of a configuration. */
const configKey = (c: BurstConfig) =>
  `${c.processes}proc${c.schedulerOnly ? '.schedulerOnly' : c.concurrency === undefined ? '' : `.c${c.concurrency}`}`;
const configLabel = (c: BurstConfig) =>
  `${c.processes} process${c.processes > 1 ? 'es' : ''}, ${c.schedulerOnly ? 'scheduler role only (no workers)' : `concurrency ${c.concurrency ?? `${DEFAULT_CONCURRENCY} (default)`}`}`;
const sizeKey = (n: number) => (n >= 1_000_000 ? `${n / 1_000_000}m` : `${n / 1000}k`);

/** A duration for a table: ms below 10 s, else seconds; Infinity means "not within the deadline". */
function dur(ms: number, deadlineMs?: number): string {
  if (ms === Number.POSITIVE_INFINITY) return deadlineMs ? `> ${fmt(deadlineMs / 1000)} s` : '—';
  if (!Number.isFinite(ms)) return '—';
  return ms < 10_000 ? `${fmt(ms)} ms` : `${fmt(ms / 1000, 1)} s`;
}

const yes = (ok: boolean) => (ok ? 'met' : '**missed**');

function medianOf<T>(items: T[], pick: (t: T) => number): number {
  const v = items.map(pick);
  // A value past the deadline in most rounds makes the median past it too.
  const inf = v.filter((x) => x === Number.POSITIVE_INFINITY).length;
  if (inf * 2 > v.length) return Number.POSITIVE_INFINITY;
  return median(v.filter((x) => x !== Number.POSITIVE_INFINITY));
}

async function roundTripMs(url: string): Promise<number> {
  const db = await openPostgres(url, 1, () => undefined);
  try {
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t = performance.now();
      await db.query('SELECT clock_timestamp() AS now');
      times.push(performance.now() - t);
    }
    return median(times.slice(20));
  } finally {
    await db.close();
  }
}

export async function benchScheduler(
  options: SchedulerBenchOptions,
): Promise<{ markdown: string; summary: Record<string, number> }> {
  const plan = planFor(options.quick);
  const summary: Record<string, number> = {};
  const md: string[] = ['## Scheduler', ''];
  const pgVersion = options.postgresUrl ? await postgresReachable(options.postgresUrl) : undefined;
  const pgUrl = pgVersion ? options.postgresUrl : undefined;

  const D = plan.burstDeadlineMs;
  md.push(
    `Method. Everything runs on this machine (${availableParallelism()} CPUs; PostgreSQL ${pgVersion ?? 'not reachable'}): service processes, PostgreSQL, model server and benchmark share those CPUs. Times are on the database clock, relative to the slot.`,
    '',
    ...(pgUrl
      ? [
          `- **Tasks due at one slot** (PostgreSQL): per configuration a fresh database and real service processes (as \`npm start\` runs them, \`SVC_ROLE=scheduler,worker\`, otherwise defaults: \`SVC_ORG_CONCURRENCY\` 2, info logs to a pipe), an instant model server in its own process. Daily tasks are inserted by one SQL statement over ${plan.organizations} paid-plan organizations (no run limit, at most ${Math.ceil(plan.burstTasks / plan.organizations) + LIGHT_SLOTS} tasks each, within the plan's task limit), \`next_run_at\` = a slot on a whole second about 2 s ahead (not a whole minute, so a round does not wait for one; the claimer does a daily task's work either way). First a light phase, then a \`CHECKPOINT\` (not timed: the burst starts from a quiet database, whatever was written before it), then the burst of ${fmt(plan.burstTasks)} tasks${options.quick ? ' (quick mode: 1,000 instead of 10,000)' : ''}. "All created" = every run visible (polled every 50 ms); start lag = \`started_at - slot_at\` per run (nearest rank, a run not started counts as infinitely late); "all started/completed" = the last \`started_at\`/\`completed_at\`; runs/s = runs completed per second from the slot to the last completion (or to the end of following). Following stops ${fmt(D / 1000)} s after the slot ("> ${fmt(D / 1000)} s"). ${plan.burstRounds} round${plan.burstRounds > 1 ? 's (medians)' : ''} per configuration (BENCH_SCHEDULER_ROUNDS). Workers drain a burst at a few hundred runs/s, so a 10,000-run burst is not followed to its last run: runs/s is what completed from the slot to the end of following (sizes and deadlines in bench/sizes.ts).`,
        ]
      : []),
    `- **Claim cycle**: the service's Deps in-process (\`startService(config, { listen: false, startLoops: false })\`, logs produced and dropped); tasks inserted by \`generate_series\`, ${plan.due} of them due; \`DueTaskClaimer.tick()\` timed over ${plan.claimTicks} ticks after a warm-up (median), the created runs deleted and the same tasks made due again between ticks.`,
    '',
  );

  if (!pgUrl) {
    md.push(
      options.postgresUrl
        ? `> PostgreSQL at \`${redact(options.postgresUrl)}\` is not reachable: the multi-process and PostgreSQL measurements were skipped.`
        : '> No PostgreSQL server was given: the multi-process and PostgreSQL measurements were skipped.',
      '',
    );
  }

  // ---- Tasks due at one slot (PostgreSQL only) ----
  const bursts = new Map<BurstConfig, ScenarioResult[]>();
  if (pgUrl) {
    const model = await startModelServer();
    try {
      for (let round = 0; round < plan.burstRounds; round++) {
        for (const config of plan.configs) {
          progress(
            `${fmt(plan.burstTasks)} tasks due at one slot: ${configLabel(config)}, round ${round + 1}`,
          );
          const result = await runScenario({
            baseUrl: pgUrl,
            modelUrl: model.url,
            config,
            tasks: plan.burstTasks,
            organizations: plan.organizations,
            completionDeadlineMs: plan.burstDeadlineMs,
            // Where PostgreSQL's time goes, once: the first configuration's first round.
            sampleActivity: round === 0 && config === plan.configs[0],
            cpuProfDir: process.env.BENCH_CPU_PROF,
          });
          bursts.set(config, [...(bursts.get(config) ?? []), result]);
        }
      }
    } finally {
      await model.proc.stop();
    }
  }

  // ---- Claim cycle ----
  const claims: ClaimCycleResult[] = [];
  let rttMs = Number.NaN;
  if (pgUrl) {
    const rttDb = await createDatabase(pgUrl);
    try {
      rttMs = await roundTripMs(rttDb.url);
    } finally {
      await rttDb.drop();
    }
    for (const [i, total] of plan.claimTotalsPg.entries()) {
      progress(`claim cycle, PostgreSQL, ${fmt(total)} tasks`);
      claims.push(
        await measureClaimCycle({
          backend: 'postgres',
          baseUrl: pgUrl,
          total,
          due: plan.due,
          rounds: plan.claimTicks,
          // The worker's claim with a backlog, in the smallest database.
          workerClaimPending: i === 0 ? [1_000, 10_000] : undefined,
        }),
      );
    }
  }
  // Without PostgreSQL, quick mode still compares two PGlite sizes.
  const pgliteTotals =
    !pgUrl && plan.claimTotalsPglite.length < 2 ? [10_000, 100_000] : plan.claimTotalsPglite;
  for (const total of pgliteTotals) {
    progress(`claim cycle, PGlite, ${fmt(total)} tasks`);
    claims.push(
      await measureClaimCycle({ backend: 'pglite', total, due: plan.due, rounds: plan.claimTicks }),
    );
  }

  // ---- Markdown: bursts ----
  if (bursts.size) {
    md.push(
      `### ${fmt(plan.burstTasks)} tasks due at one slot (PostgreSQL)`,
      '',
      '| configuration | all runs created | dispatch lag p50 / p99 | all runs started | start lag p50 / p99 | all completed | runs/s | failed |',
      '| --- | --: | --: | --: | --: | --: | --: | --: |',
    );
    for (const [config, results] of bursts) {
      const b = results.map((r) => r.burst);
      const k = configKey(config);
      const created = medianOf(b, (x) => x.allCreatedMs);
      const d50 = medianOf(b, (x) => x.dispatchLagP50Ms);
      const d99 = medianOf(b, (x) => x.dispatchLagP99Ms);
      const started = medianOf(b, (x) => x.allStartedMs);
      const s50 = medianOf(b, (x) => x.startLagP50Ms);
      const s99 = medianOf(b, (x) => x.startLagP99Ms);
      const completed = medianOf(b, (x) => x.allCompletedMs);
      const rate = median(b.map((x) => x.runsPerSecond));
      const last = b.at(-1);
      const unfinished =
        last && !last.finished ? ` (${fmt(last.atEnd.done)} of ${fmt(last.tasks)} by then)` : '';
      const createdCell = `${dur(created, D)}${Number.isFinite(created) || !last ? '' : ` (${fmt(last.atEnd.created)} created)`}`;
      const workerCells = config.schedulerOnly
        ? '— | — | — | — | —'
        : `${dur(started, D)} | ${dur(s50, D)} / ${dur(s99, D)} | ${dur(completed, D)}${unfinished} | ${fmt(rate)} | ${fmt(median(b.map((x) => x.failed)))}`;
      md.push(
        `| ${configLabel(config)} | ${createdCell} | ${dur(d50, D)} / ${dur(d99, D)} | ${workerCells} |`,
      );
      if (config.schedulerOnly) {
        if (Number.isFinite(created)) summary[`allRunsCreatedMs.pg.${k}`] = Math.round(created);
        continue;
      }
      const put = (name: string, v: number) => {
        if (Number.isFinite(v)) summary[`${name}.pg.${k}`] = Math.round(v);
      };
      if (last && !last.finished) {
        summary[`runsStartedByDeadline.pg.${k}`] = last.atEnd.started;
        summary[`runsCompletedByDeadline.pg.${k}`] = last.atEnd.done;
      }
      put('allRunsCreatedMs', created);
      put('dispatchLagP99Ms', d99);
      put('allRunsStartedMs', started);
      put('startLagP50Ms', s50);
      put('startLagP99Ms', s99);
      put('allRunsCompletedMs', completed);
      put('runsPerSecond', rate);
    }
    summary.burstTasks = plan.burstTasks;
    md.push(
      '',
      `Light load (no backlog), before the burst in the same processes: ${LIGHT_SLOTS} slots a second apart, each with as many tasks as the workers can run at once, ${LIGHT_MAX_PER_SLOT} at most:`,
      '',
      '| configuration | runs (per slot × slots) | start lag p50 | p99 | max |',
      '| --- | --: | --: | --: | --: |',
    );
    for (const [config, results] of bursts) {
      const l = results.flatMap((r) => (r.light ? [r.light] : []));
      if (!l.length) continue;
      const k = configKey(config);
      const p50 = medianOf(l, (x) => x.startLagP50Ms);
      const p99 = medianOf(l, (x) => x.startLagP99Ms);
      const first = l[0];
      md.push(
        `| ${configLabel(config)} | ${first ? `${first.perSlot} × ${first.slots}` : '—'} | ${dur(p50)} | ${dur(p99)} | ${dur(medianOf(l, (x) => x.startLagMaxMs))} |`,
      );
      if (Number.isFinite(p50)) summary[`lightStartLagP50Ms.pg.${k}`] = Math.round(p50);
      if (Number.isFinite(p99)) summary[`lightStartLagP99Ms.pg.${k}`] = Math.round(p99);
    }
    md.push('');
  }

  // ---- Markdown: claim cycle ----
  md.push(
    '### One claim cycle as the tasks table grows',
    '',
    `| backend | tasks in table | due | tick, ${plan.due} runs created (median) | per due task | tick, nothing due | nearestDueAt | due query (EXPLAIN ANALYZE) | tasks_due_idx | insert + ANALYZE |`,
    '| --- | --: | --: | --: | --: | --: | --: | --: | --- | --: |',
  );
  for (const c of claims) {
    md.push(
      `| ${c.backend === 'postgres' ? 'PostgreSQL' : 'PGlite'} | ${fmt(c.total)} | ${c.due} | ${fmt(c.tickMs)} ms | ${fmt(c.tickMs / c.due, 2)} ms | ${fmt(c.idleTickMs, 2)} ms | ${fmt(c.nearestDueMs, 2)} ms | ${fmt(c.plan.executionMs, 2)} ms | ${c.plan.usesDueIndex ? 'yes' : '**no**'} | ${fmt(c.insertSeconds, 1)} s |`,
    );
    const key = `${c.backend === 'postgres' ? 'pg' : 'pglite'}.${sizeKey(c.total)}`;
    summary[`claimTickMs.${key}`] = Math.round(c.tickMs);
    summary[`idleTickMs.${key}`] = Number(c.idleTickMs.toFixed(2));
    summary[`dueQueryMs.${key}`] = Number(c.plan.executionMs.toFixed(3));
  }
  md.push('');
  const largestPg = claims.filter((c) => c.backend === 'postgres').at(-1);
  if (largestPg) {
    md.push(
      `Key plan line of the due-task query with ${fmt(largestPg.total)} tasks (PostgreSQL):`,
      '',
      '```',
      largestPg.plan.keyLine,
      ...largestPg.plan.lines.filter((l) => /Execution Time/.test(l)).map((l) => l.trim()),
      '```',
      '',
    );
  }

  // ---- Targets ----
  const targets: string[] = [];
  for (const [config, results] of bursts) {
    const created = medianOf(
      results.map((r) => r.burst),
      (x) => x.allCreatedMs,
    );
    targets.push(
      `| all ${fmt(plan.burstTasks)} runs created within 2 s of the slot (${configLabel(config)}) | ${dur(created, plan.burstDeadlineMs)} | ${yes(created <= 2000)} |`,
    );
  }
  for (const [config, results] of bursts) {
    const l = results.flatMap((r) => (r.light ? [r.light] : []));
    if (!l.length) continue;
    const p50 = medianOf(l, (x) => x.startLagP50Ms);
    const p99 = medianOf(l, (x) => x.startLagP99Ms);
    targets.push(
      `| start lag p50 ≤ 250 ms, p99 ≤ 1 s outside bursts (light load; ${configLabel(config)}) | ${dur(p50)} / ${dur(p99)} | ${yes(p50 <= 250 && p99 <= 1000)} |`,
    );
  }
  for (const backend of ['postgres', 'pglite'] as const) {
    const cs = claims.filter((c) => c.backend === backend);
    const small = cs[0];
    const large = cs.at(-1);
    if (!small || !large || small === large) continue;
    const ratio = large.tickMs / small.tickMs;
    summary[`claimTickGrowth.${backend === 'postgres' ? 'pg' : 'pglite'}`] = Number(ratio.toFixed(2));
    targets.push(
      `| claim cycle flat as the table grows (${backend === 'postgres' ? 'PostgreSQL' : 'PGlite'}, ${fmt(small.total)} → ${fmt(large.total)} tasks): growth ≤ ×${FLAT_GROWTH} (a flat cycle; ×${SCAN_BAR} or more would mean it scans the table) | ${fmt(small.tickMs)} → ${fmt(large.tickMs)} ms: **×${fmt(ratio, 2)}**, due query on tasks_due_idx: ${large.plan.usesDueIndex ? 'yes' : 'no'} | ${ratio <= FLAT_GROWTH && large.plan.usesDueIndex ? 'yes' : ratio < SCAN_BAR && large.plan.usesDueIndex ? `no: grows ×${fmt(ratio, 2)} for ${fmt(large.total / small.total)}× the rows (no scan)` : 'no'} |`,
    );
  }
  if (targets.length) {
    md.push('### Targets', '', '| target | measured | |', '| --- | --- | --- |', ...targets, '');
    if (bursts.size) {
      md.push(
        `The start-lag target applies outside bursts (the light rows). In a ${fmt(plan.burstTasks)}-run burst every run waits for a free worker, so its start lag is set by worker throughput (runs/s above, at most \`SVC_WORKER_CONCURRENCY\` × processes at once), not by the scheduler; it is reported, not judged.`,
        '',
      );
    }
  }

  // ---- Findings ----
  const findings: string[] = [];
  const createdOf = (pred: (c: BurstConfig) => boolean) =>
    [...bursts]
      .filter(([c]) => pred(c))
      .map(
        ([c, rs]) =>
          `${dur(
            medianOf(
              rs.map((r) => r.burst),
              (x) => x.allCreatedMs,
            ),
            plan.burstDeadlineMs,
          )} (${configLabel(c)})`,
      )
      .join(', ');
  const rateOf = (pred: (c: BurstConfig) => boolean) =>
    [...bursts]
      .filter(([c]) => pred(c))
      .map(([c, rs]) => `${fmt(median(rs.map((r) => r.burst.runsPerSecond)))} runs/s (${configLabel(c)})`)
      .join(', ');
  const pgSmall = claims.find((c) => c.backend === 'postgres');
  if (pgSmall && Number.isFinite(rttMs)) {
    const perTask = pgSmall.tickMs / pgSmall.due;
    summary.claimPerTaskMs = Number(perTask.toFixed(2));
    summary.pgRoundTripMs = Number(rttMs.toFixed(3));
    findings.push(
      `- **Run creation is set-based, and now bound by the work per row.** A batch of due tasks (up to 500) is a fixed handful of statements (\`lockDueTasks\`, one \`insertSlotRuns\` that writes every run with its ledger row and skips tasks in flight or slots taken, one \`advanceTasks\`, NOTIFY; src/scheduler/claimer.ts), whatever the batch's size. One tick of ${pgSmall.due} due tasks costs ${fmt(pgSmall.tickMs)} ms, ${fmt(perTask, 2)} ms per task (one round trip, \`SELECT clock_timestamp()\`, takes ${fmt(rttMs, 2)} ms here): what remains per task is planning its slot (time-zone arithmetic: offsets are cached per zone and hour, so a weekly slot takes about 0.4 µs instead of 11 µs through Intl each time), two inserted rows with their index entries (and their foreign keys' checks), one updated task row and its log line. So one idle scheduler creates about ${fmt(Math.round(100 / perTask) * 10)} runs/s and ${fmt(plan.burstTasks)} due tasks need about ${fmt((plan.burstTasks * perTask) / 1000, 1)} s.${bursts.size ? ` Measured, all ${fmt(plan.burstTasks)} runs existed after ${createdOf((c) => !!c.schedulerOnly)} with the scheduler role alone, and after ${createdOf((c) => !c.schedulerOnly)} with the workers running: schedulers in several processes share the batches (SKIP LOCKED), but here they and the workers share ${availableParallelism()} CPUs with PostgreSQL.` : ''} A tick claims with two transactions at once on PostgreSQL (each takes its own batches), so one plans its slots while the other waits for the database; that took a 10,000-task burst from 2.0 s to 1.4–1.8 s with the workers running, and the cached offsets then to 0.77–0.80 s (full runs on this machine). Measured on 2026-12-01 side by side (the commit before in a git worktree, alternated, three rounds each), four costs per task were removed: the due query is ordered by the slot alone, the order of tasks_due_idx, so it reads that index and stops at the batch (ordered by slot and id, PostgreSQL read and sorted every due task for each batch, since FOR UPDATE rules out a top-N sort: 26 ms for a batch of 500 out of 10,000 due tasks, against 1.4 ms); it reads the 10 columns a claim uses instead of all 35; the runs' statement takes each task's organization from the claim instead of joining the tasks table (its planning went from 13 to 2 ms); and a run's log line is written in pino's format by the scheduler itself (through pino's redaction pass it was 28% of the scheduler's CPU). One claim cycle of 10,000 due tasks in one process went from 1,038–1,080 ms to 722–787 ms, the process's CPU from 636–683 ms to 346–371 ms and PostgreSQL's from 990–1,040 ms to 820–850 ms; in this burst, all runs existed after 1,399–1,559 ms against 1,827–2,077 ms with the workers running, and after 1,186–1,274 ms against 1,347–1,411 ms with the scheduler alone. The due-task query itself is ${fmt(pgSmall.plan.executionMs, 2)} ms on tasks_due_idx and does not grow with the table (above).`,
    );
  }
  const wc = pgSmall?.workerClaim;
  if (wc?.length) {
    for (const w of wc)
      summary[`workerClaimMs.pg.pending${sizeKey(w.pending)}`] = Number(w.executionMs.toFixed(1));
    const big = wc.at(-1);
    findings.push(
      `- **A worker's claim does not grow with the backlog.** \`claimRuns\` (src/db/sql/run-claim.ts) finds the organizations with pending runs by a loose index scan and takes only the oldest few of each (\`runs_pending_org_idx\`), under advisory locks of the organizations it claims for only: EXPLAIN ANALYZE of its pick ${wc.map((w) => `${fmt(w.executionMs, 1)} ms with ${fmt(w.pending)} pending`).join(', ')}. During a burst a claim takes at most the worker's free slots (≤ \`SVC_WORKER_CONCURRENCY\`); what the workers spend per run is executing and recording it (its usage and end go several per round trip, \`worker/run-writes.ts\`)${bursts.size ? `: ${rateOf((c) => !c.schedulerOnly)}, from the slot to the last completion or the deadline` : ''}.`,
      '',
      '```',
      ...(big?.keyLines ?? []),
      '```',
      '',
    );
  }
  const sampled = [...bursts].find(([, rs]) => rs[0]?.burst.activity);
  const activity = sampled?.[1][0]?.burst.activity;
  if (sampled && activity?.length) {
    const total = activity.reduce((a, x) => a + x.busy, 0);
    findings.push(
      `- **Where PostgreSQL spent the burst** (${configLabel(sampled[0])}): \`pg_stat_activity\` sampled every ~20 ms from the slot to the end of following. "Busy" is the average number of the service's backends running the statement (${fmt(total, 2)} in all, on ${availableParallelism()} CPUs); "WAL wait" is the part spent waiting for commit flushes.`,
      '',
      '| statement (service function) | busy backends | of which WAL wait | share |',
      '| --- | --: | --: | --: |',
      ...activity
        .slice(0, 8)
        .map(
          (a) =>
            `| ${a.statement.replace(/\|/g, '\\|')} | ${fmt(a.busy, 2)} | ${fmt(a.walWait, 2)} | ${fmt((100 * a.busy) / total)} % |`,
        ),
    );
    const claim = activity.find((a) => a.statement.startsWith('claimRuns'));
    if (claim) summary.burstClaimRunsBusyShare = Number((claim.busy / total).toFixed(2));
  }
  if (findings.length) md.push('### Findings', '', ...findings, '');
  return { markdown: md.join('\n'), summary };
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'the given URL';
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const quick = process.argv.includes('--quick');
  const postgresUrl =
    process.env.BENCH_DATABASE_URL ??
    process.env.TEST_DATABASE_URL ??
    'postgres://postgres@127.0.0.1:5432/postgres';
  const { markdown, summary } = await benchScheduler({ quick, postgresUrl });
  process.stdout.write(`${markdown}\n`);
  if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
}
