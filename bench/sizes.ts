// Every size of `npm run bench` in one place, with each part's time budget: how many rounds,
// how long a load, how many units, and on which backends a part runs. bench/run.ts warns in the
// report when a part takes longer than its budget, so a size raised here shows its cost at once.
//
// Budgets are for an idle 2-core machine: a full run in at most 560 s and a quick one in
// at most 110 s (the acceptance of `npm run bench`: under 10 minutes and 2 minutes). A busy
// machine stretches the parts that wait for work to be done (scheduler, engine, peers) more than
// the API's, whose loads last a fixed time, so an overrun is reported with the load average
// beside it. Measured on this machine while three other benches and test suites ran
// (2026-11-26): quick 97 s at load 3.4-6.6 (api 27, scheduler 22, engine 13, peers 35); full
// 762 s at load 8-19 (api 240, scheduler 118, engine 178, peers 227, before the API's pause
// between loads went from 0.5 to 0.25 s). On an idle machine (2026-12-01, load average about 1
// before): full 450-458 s in three runs (api 159-160, scheduler 58-59, engine 86-88, peers
// 143-154) and quick 76 s, in a fast moment of this VM (the bare primary-key route at 13,700-
// 14,600 req/s on PostgreSQL); the day before, at half that speed, 579-600 s, of which up to
// 30 s waiting for pg-boss's schedule (its cron monitor now checks every second).

export const PARTS = ['api', 'scheduler', 'engine', 'durability', 'peers'] as const;
export type Part = (typeof PARTS)[number];

/**
 * The parts of a run without --only. The durability part measures one setting of the embedded
 * database (fsync on and off, docs/operations.md) and is run on its own when that is in question.
 */
export const DEFAULT_PARTS: readonly Part[] = ['api', 'scheduler', 'engine', 'peers'];

/** Seconds each part may take on an idle 2-core machine, and the whole run. */
export const BUDGET_SECONDS: Record<'quick' | 'full', Record<Part | 'total', number>> = {
  quick: { api: 30, scheduler: 22, engine: 16, peers: 42, durability: 60, total: 110 },
  full: { api: 180, scheduler: 85, engine: 105, peers: 190, durability: 240, total: 560 },
};

type Backend = 'pglite' | 'postgres';

/**
 * The backends a part measures. Quick runs measure PostgreSQL only when it is reachable (the
 * targets are set for it, and PGlite's start-ups and single-connection writes would take most of
 * a quick run's two minutes); full runs measure both.
 */
export function backendsOf(quick: boolean, postgresUrl: string | undefined): Backend[] {
  if (!postgresUrl) return ['pglite'];
  return quick ? ['postgres'] : ['pglite', 'postgres'];
}

/**
 * The API part (bench/api.ts): autocannon with 50 connections for `duration` s per target and
 * round, a service target right beside its reference in each round. Many short rounds rather
 * than a few long ones: this machine's speed moves within seconds, and a ratio is the median of
 * the rounds' ratios, each of two loads taken back to back. A round of 1.5 s carries
 * 1,500–35,000 requests here, enough for a p99 (the 15th–350th slowest); four rounds give a
 * median that one busy moment does not move (each load also costs about 0.5 s of autocannon's
 * connections opened and closed: six rounds took the part to 242 s, 2026-11-30). The
 * informational targets (the hello-world route, the unbatched create floor: no goal is judged
 * against them) take one round in full runs and none in quick runs.
 */
export function apiSizes(quick: boolean) {
  return quick
    ? { rounds: 2, duration: 1, warmup: 0.25, settle: 0.25, informationalRounds: 0 }
    : { rounds: 4, duration: 1.5, warmup: 0.5, settle: 0.25, informationalRounds: 1 };
}
export const API_INFORMATIONAL = ['hello', 'floorCreate'];

/**
 * The scheduler part (bench/scheduler.ts). The burst is the target's size (10,000 tasks due at
 * one slot; 1,000 in quick runs). Following a burst stops `burstDeadlineMs` after the slot: the
 * runs are all created within about a second, and what the workers then do for half a minute
 * (drain 10,000 runs at 300–400 runs/s) is measured by its rate over the time followed, not by
 * waiting for the last run. The claim cycle compares two table sizes 100× apart on PostgreSQL
 * (10× on PGlite, whose inserts are slower), each over `claimTicks` ticks (median).
 */
export function schedulerSizes(quick: boolean) {
  return quick
    ? {
        burstTasks: 1_000,
        organizations: 100,
        configs: [{ processes: 1, concurrency: undefined }],
        burstRounds: 1,
        burstDeadlineMs: 10_000,
        claimTotalsPg: [10_000, 100_000],
        // PGlite's claim cycle in full runs only (two sizes when PostgreSQL is not reachable).
        claimTotalsPglite: [] as number[],
        claimTicks: 3,
        due: 100,
      }
    : {
        burstTasks: 10_000,
        organizations: 200,
        configs: [
          { processes: 1, concurrency: undefined },
          { processes: 3, concurrency: undefined },
          { processes: 1, concurrency: undefined, schedulerOnly: true },
        ],
        burstRounds: 1,
        burstDeadlineMs: 12_000,
        claimTotalsPg: [10_000, 1_000_000],
        claimTotalsPglite: [10_000, 100_000],
        claimTicks: 9,
        due: 100,
      };
}

/**
 * The run engine part (bench/engine.ts): backlogs drained by a fresh worker process per row and
 * round. A row's runs span 20 or more waves of the worker's concurrency, so its start and its
 * last wave are a few percent of the span; a warm-up drained first (untimed) keeps a fresh
 * process's cold code out of the measure (one run per task: warm-up + runs <= 1,000). PGlite's
 * rows are for information (the engine's goals are set for PostgreSQL) and each costs two
 * start-ups of the embedded database, so they take fewer rounds.
 */
export function engineSizes(quick: boolean) {
  return {
    rounds: quick ? 1 : 3,
    pgliteRounds: quick ? 1 : 2,
    /** RSS of an idle worker, full runs only (the peers part measures it in every run). */
    idleRss: !quick,
    rows: quick
      ? [
          {
            key: 'instant-c4',
            delayMs: 0,
            concurrency: 4,
            orgConcurrency: undefined,
            runs: 200,
            warmUp: 200,
          },
          { key: '100ms-c4', delayMs: 100, concurrency: 4, orgConcurrency: undefined, runs: 60, warmUp: 8 },
        ]
      : [
          {
            key: 'instant-c4',
            delayMs: 0,
            concurrency: 4,
            orgConcurrency: undefined,
            runs: 600,
            warmUp: 400,
          },
          { key: '100ms-c4', delayMs: 100, concurrency: 4, orgConcurrency: undefined, runs: 160, warmUp: 20 },
          { key: '100ms-c32', delayMs: 100, concurrency: 32, orgConcurrency: 32, runs: 256, warmUp: 64 },
        ],
  };
}

/** The durability part (bench/durability.ts, PGlite only; not in a run without --only). */
export function durabilitySizes(quick: boolean) {
  return { rounds: quick ? 1 : 3, commits: quick ? 1000 : 5000, tasks: quick ? 200 : 1000 };
}

interface PeerRow {
  key: string;
  delayMs: number;
  concurrency: number;
  units: number;
  /** Rounds this row is measured in (the first ones). */
  rounds: number;
}

/**
 * Jobs each worker process runs, untimed, before its runs/s rows: a fresh process runs its first
 * jobs with cold code (V8 compiles its hot functions as they run), and a worker runs for days,
 * so what a job costs a warm worker is the measure (as in the engine part). 100 were too few:
 * measured with this part's modules at concurrency 32 (instant model, alternated, 2026-11-30),
 * after 100 the service's worker spent 1.07–1.14 ms of CPU per run over the next 1,000 and
 * pg-boss's 1.03–1.06 (0.88–0.98× of pg-boss's runs/s), after 1,000 they spent 0.46 and 0.57 ms
 * over the next 3,000 (1.08–1.11×); after 300–500 the ratio was 1.04–1.18×. (Quick runs: 200.)
 */
const PEER_WARM_UP = 500;

/**
 * Jobs added the system's own way (for the service, run now through its API), untimed, before
 * the enqueue -> start probes: measured with the service (sequential run-nows, then 60 probes
 * 50 ms apart), run now -> model request p50 3.56-3.69 ms in a fresh process, 3.15-3.38 after
 * 300-600, 2.76-2.99 after 1,000, 2.75-2.82 after 2,000. (Quick runs: 300.)
 */
const PROBE_WARM_UP = 1000;

/**
 * The peers part (bench/peers.ts). Latencies are pooled over the rounds (`probes` per round
 * and system, 30 ms apart: a probe's run has started and ended well before the next, 5-10 ms
 * after its call, so the load stays light). 100 per round, pooled 200: the p99 of 200 is the
 * third largest; of the 80 taken before (40 per round, 50 ms apart) it was the second largest,
 * which one pause of a process decided: traced in the service (scratch, 300 probes), every
 * probe over 8 ms had the event loop held 5-9 ms, most by a collection of V8's (a scavenge of
 * 3-7 ms, or a mark-compact's final pause of 4-10 ms), and the pooled p99s of the service and
 * Graphile Worker swapped places from one run to the next (11.8 vs 12.1, 12.1 vs 9.9, 7.8 vs
 * 8.6 ms) with their p50s within 3%. Runs/s and CPU per run are medians of the rounds. An
 * instant-model row of 1,000 units is 125 waves at concurrency 8, one of 2,000 is 62 at 32; a
 * 100 ms row is 30 waves at 8 and 20 at 32, where the model's wait, not the machine, sets the
 * pace, so one round tells as much as two.
 * The slot measure needs a minute boundary (the peers' schedulers know only minutes): it is
 * taken once, between two systems' measures when a boundary is near (bench/peers.ts). Quick
 * runs leave out what has no goal or needs a minute: the 100 ms rows, the RSS with jobs queued,
 * slot → start, and BullMQ (on Redis, for reference only).
 */
export function peerSizes(quick: boolean) {
  return quick
    ? {
        rounds: 1,
        // Fewer in quick runs, whose two minutes hold every part.
        warmUp: 200,
        probeWarmUp: 300,
        probes: 50,
        gapMs: 30,
        queued: 1000,
        /** Rounds in which the RSS with `queued` jobs is sampled (reported, no goal). */
        queuedRounds: 0,
        slot: false,
        bullmq: false,
        rows: [
          { key: 'instant-c8', delayMs: 0, concurrency: 8, units: 500, rounds: 1 },
          { key: 'instant-c32', delayMs: 0, concurrency: 32, units: 500, rounds: 1 },
        ] satisfies PeerRow[],
      }
    : {
        rounds: 2,
        warmUp: PEER_WARM_UP,
        probeWarmUp: PROBE_WARM_UP,
        probes: 100,
        gapMs: 30,
        queued: 1000,
        queuedRounds: 1,
        slot: true,
        bullmq: true,
        rows: [
          { key: 'instant-c8', delayMs: 0, concurrency: 8, units: 1000, rounds: 2 },
          { key: 'instant-c32', delayMs: 0, concurrency: 32, units: 2000, rounds: 2 },
          { key: '100ms-c8', delayMs: 100, concurrency: 8, units: 240, rounds: 1 },
          { key: '100ms-c32', delayMs: 100, concurrency: 32, units: 640, rounds: 1 },
        ] satisfies PeerRow[],
      };
}
export type PeerSizes = ReturnType<typeof peerSizes>;
