// The peers part of `npm run bench`: the service side by side with Graphile Worker, pg-boss and
// (when Redis answers) BullMQ, in one run, on the same PostgreSQL server, with the same model
// stand-in, in interleaved rounds (service, Graphile Worker, pg-boss, BullMQ, service, …), each
// system in its own fresh database (dropped afterwards) and its worker in a process of its own.
// Sizes (rounds, units, which measures a quick run leaves out) are in bench/sizes.ts.
import type { PartOptions, PartResult } from './api.ts';
import { type Child, processMemory, progress, startBaseline } from './baselines.ts';
import {
  drained,
  lightLoad,
  type SlotResult,
  setModelDelay,
  slotToStart,
  type ThroughputResult,
  throughput,
} from './peers-measures.ts';
import { type PeerResults, peersMarkdown, SERVICE_IDLE_ROLES } from './peers-report.ts';
import { modelCeiling, redisAnswers } from './peers-spawn.ts';
import {
  type BenchSystem,
  bullmqSystem,
  graphileWorkerSystem,
  pgBossSystem,
  serviceSystem,
} from './peers-systems.ts';
import { peerSizes } from './sizes.ts';

const REDIS_URL = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';
const SLOT_TASKS = 20;
/**
 * The slot measure starts its four processes (about 3 s) and keeps 6 s between them and the
 * minute it measures (slotToStart). It is taken between two systems' measures as soon as the
 * next minute boundary is at most SLOT_MAX_WAIT_MS further than that, so the run seldom idles
 * long for a minute (between two measures nothing else runs: the boundary is quiet).
 */
const SLOT_LEAD_MS = 9_000;
const SLOT_MAX_WAIT_MS = 10_000;

export async function benchPeers(options: PartOptions): Promise<PartResult> {
  if (!options.postgresUrl) {
    return {
      markdown: '## Peers\n\nNot measured: the peers need PostgreSQL, which was not reachable.',
      summary: {},
    };
  }
  const postgresUrl = options.postgresUrl;
  const sizes = peerSizes(options.quick);
  const only = process.env.BENCH_PEERS_MEASURES?.split(',');
  const wants = (m: string) => !only || only.includes(m);
  const bulk = Math.max(
    ...sizes.rows.map((r) => r.units),
    sizes.queuedRounds ? sizes.queued : 0,
    sizes.probes + sizes.probeWarmUp,
    sizes.warmUp,
  );
  let model: Child | undefined;
  const systems: BenchSystem[] = [];
  const results: PeerResults = {
    sizes,
    latencies: new Map(),
    idleRss: new Map(),
    serviceIdleRss: new Map(),
    queuedRss: new Map(),
    throughput: new Map(),
    ceilings: new Map(),
    slots: new Map(),
    redis: false,
  };
  const push = <T>(m: Map<string, T[]>, key: string, v: T) => m.set(key, [...(m.get(key) ?? []), v]);
  try {
    model = await startBaseline('model', '0');
    const modelUrl = model.url;
    results.redis = sizes.bullmq && (await redisAnswers(REDIS_URL));
    progress(
      `peers: databases (service with ${bulk + SLOT_TASKS} tasks)${results.redis ? '' : sizes.bullmq ? '; Redis not answering: no BullMQ' : '; no BullMQ (quick run)'}`,
    );
    // The systems' databases are set up at once: nothing is measured yet.
    systems.push(
      ...(await Promise.all([
        serviceSystem(postgresUrl, bulk, SLOT_TASKS),
        graphileWorkerSystem(postgresUrl),
        pgBossSystem(postgresUrl),
        ...(results.redis ? [bullmqSystem(REDIS_URL)] : []),
      ])),
    );
    // Every worker started once, unmeasured, all at once: the first start after a change of the
    // code fills Node's compile cache (bench/baselines.ts, childEnv), so the measured starts are
    // alike whether the cache was warm before the run or not.
    await Promise.all(systems.map(async (s) => (await s.start({ concurrency: 8, modelUrl })).stop()));
    progress('peers: systems ready, each worker started once');
    const serviceMarkers = Array.from({ length: SLOT_TASKS }, (_, i) => `svc-${bulk + i}`);
    let slotPending = sizes.slot && wants('slot');
    /** The slot measure, now if a minute boundary is near (or `force`), else later. */
    const maybeSlot = async (force: boolean) => {
      if (!slotPending) return;
      const now = Date.now();
      const wait = Math.ceil((now + SLOT_LEAD_MS) / 60_000) * 60_000 - now - SLOT_LEAD_MS;
      if (!force && wait > SLOT_MAX_WAIT_MS) return;
      slotPending = false;
      await setModelDelay(modelUrl, 0);
      progress(`  peers slot: the next minute is ${((wait + SLOT_LEAD_MS) / 1000).toFixed(0)} s away`);
      const r: SlotResult = await slotToStart(systems, modelUrl, {
        count: SLOT_TASKS,
        round: 1,
        deadlineMs: 40_000,
        serviceMarkers,
      });
      for (const s of systems)
        await s.clearSchedules?.().catch((e) => progress(`peers: schedules of ${s.name}: ${String(e)}`));
      for (const [name, lags] of r) {
        for (const l of lags) push(results.slots, name, l);
        const sorted = [...lags].sort((a, b) => a - b);
        progress(
          `  peers ${name} slot: median ${sorted[SLOT_TASKS / 2]?.toFixed(0)} ms, max ${sorted.at(-1)?.toFixed(0)} ms`,
        );
      }
    };
    await maybeSlot(false);

    for (let round = 1; round <= sizes.rounds; round++) {
      // One worker process per system and concurrency: the light measures (concurrency 8) and
      // the runs/s rows of that concurrency, the model's delay switched between them.
      for (const concurrency of [8, 32]) {
        const rows = wants('throughput')
          ? sizes.rows.filter((r) => r.concurrency === concurrency && round <= r.rounds)
          : [];
        const light = concurrency === 8 && wants('light');
        if (!rows.length && !light) continue;
        for (const row of rows) {
          if (row.delayMs === 0) continue;
          await setModelDelay(modelUrl, row.delayMs);
          const c = await modelCeiling(modelUrl, row.units, row.concurrency);
          push(results.ceilings, row.key, c);
          progress(`  peers ceiling ${row.key} round ${round}: ${c.toFixed(0)} calls/s`);
        }
        for (const s of systems) {
          await setModelDelay(modelUrl, 0);
          const own = new Set(await s.backendPids());
          // The service's idle RSS is also read for the roles a worker process has, beside
          // `npm start`'s default (all roles): processes of their own on the same database,
          // started with the measured one, read at the same moment, stopped before any work.
          const idleRoles = light && s.name === 'service' ? SERVICE_IDLE_ROLES : [];
          const [child, ...idleChildren] = await Promise.all([
            s.start({ concurrency, modelUrl }),
            ...idleRoles.map((roles) => s.start({ concurrency, modelUrl, roles })),
          ]);
          if (!child) throw new Error(`${s.name}: no worker process`);
          try {
            if (light) {
              const r = await lightLoad(s, child, modelUrl, {
                ...sizes,
                round,
                queued: round <= sizes.queuedRounds ? sizes.queued : 0,
                // Read with the main process's, after the same 2 s.
                onIdle: async () => {
                  for (const [i, c] of idleChildren.entries()) {
                    const roles = idleRoles[i] ?? '';
                    push(results.serviceIdleRss, roles, processMemory(c.pid)?.rss ?? Number.NaN);
                    await c.stop();
                  }
                },
              });
              for (const l of r.latencies) push(results.latencies, s.name, l);
              push(results.idleRss, s.name, r.idleRssBytes);
              if (round <= sizes.queuedRounds) push(results.queuedRss, s.name, r.queuedRssBytes);
              const sorted = r.latencies.filter(Number.isFinite).sort((a, b) => a - b);
              progress(
                `  peers ${s.name} round ${round}: enqueue→start median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(1)} ms, idle RSS ${(r.idleRssBytes / 2 ** 20).toFixed(0)} MB${idleRoles
                  .map(
                    (roles) =>
                      ` (SVC_ROLE=${roles} ${((results.serviceIdleRss.get(roles)?.at(-1) ?? Number.NaN) / 2 ** 20).toFixed(0)} MB)`,
                  )
                  .join(
                    '',
                  )}${round <= sizes.queuedRounds ? `, ${sizes.queued} queued ${(r.queuedRssBytes / 2 ** 20).toFixed(0)} MB` : ''}`,
              );
            }
            if (rows.length) {
              // A fresh process's first jobs run cold (module loading, JIT): warmed untimed,
              // after the light measures too (their few probes do not warm it).
              await setModelDelay(modelUrl, 0);
              await s.enqueueMany(sizes.warmUp);
              await drained(s, 120_000);
            }
            for (const row of rows) {
              await setModelDelay(modelUrl, row.delayMs);
              const r: ThroughputResult = await throughput(s, child, own, modelUrl, row);
              push(results.throughput, `${s.name}.${row.key}`, r);
              progress(
                `  peers ${s.name} ${row.key} round ${round}: ${r.runsPerSecond.toFixed(0)} runs/s, CPU per run ${r.processCpuMs.toFixed(2)} + ${r.databaseCpuMs.toFixed(2)} ms`,
              );
            }
          } finally {
            await Promise.all([child, ...idleChildren].map((c) => c.stop()));
          }
          await maybeSlot(false);
        }
      }
    }
    await maybeSlot(true);
    return peersMarkdown(
      results,
      systems.map((s) => s.name),
    );
  } finally {
    for (const s of systems)
      await s.cleanup().catch((e) => progress(`peers: cleanup of ${s.name}: ${String(e)}`));
    await model?.stop();
  }
}
