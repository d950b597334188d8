// The peers part of `npm run bench`: the service side by side with Graphile Worker, pg-boss and
// (when Redis answers) BullMQ, in one run, on the same PostgreSQL server, with the same model
// stand-in, in interleaved rounds (service, Graphile Worker, pg-boss, BullMQ, service, …), each
// system in its own fresh database (dropped afterwards) and its worker in a process of its own.
import type { PartOptions, PartResult } from './api.ts';
import { type Child, progress, startBaseline } from './baselines.ts';
import {
  drained,
  lightLoad,
  type SlotResult,
  setModelDelay,
  slotToStart,
  type ThroughputResult,
  throughput,
} from './peers-measures.ts';
import { type PeerResults, peersMarkdown } from './peers-report.ts';
import { modelCeiling, redisAnswers } from './peers-spawn.ts';
import {
  type BenchSystem,
  bullmqSystem,
  graphileWorkerSystem,
  pgBossSystem,
  serviceSystem,
} from './peers-systems.ts';

const REDIS_URL = process.env.BENCH_REDIS_URL || 'redis://127.0.0.1:6379';
const SLOT_TASKS = 20;
const WARM_UP = 100;

export interface ThroughputRow {
  key: string;
  delayMs: number;
  concurrency: number;
  units: number;
}

export function peerSizes(quick: boolean) {
  return {
    rounds: quick ? 1 : 2,
    probes: quick ? 20 : 40,
    gapMs: 100,
    queued: 1000,
    rows: (quick
      ? [
          { key: 'instant-c8', delayMs: 0, concurrency: 8, units: 500 },
          { key: 'instant-c32', delayMs: 0, concurrency: 32, units: 500 },
          { key: '100ms-c8', delayMs: 100, concurrency: 8, units: 160 },
          { key: '100ms-c32', delayMs: 100, concurrency: 32, units: 480 },
        ]
      : [
          // 5,000 units would take the part past its time budget at two rounds.
          { key: 'instant-c8', delayMs: 0, concurrency: 8, units: 2000 },
          { key: 'instant-c32', delayMs: 0, concurrency: 32, units: 2000 },
          { key: '100ms-c8', delayMs: 100, concurrency: 8, units: 400 },
          { key: '100ms-c32', delayMs: 100, concurrency: 32, units: 1200 },
        ]) satisfies ThroughputRow[],
  };
}

export async function benchPeers(options: PartOptions): Promise<PartResult> {
  if (!options.postgresUrl) {
    return {
      markdown: '## Peers\n\nNot measured: the peers need PostgreSQL, which was not reachable.',
      summary: {},
    };
  }
  const sizes = peerSizes(options.quick);
  const only = process.env.BENCH_PEERS_MEASURES?.split(',');
  const wants = (m: string) => !only || only.includes(m);
  const bulk = Math.max(...sizes.rows.map((r) => r.units), sizes.queued, sizes.probes);
  let model: Child | undefined;
  const systems: BenchSystem[] = [];
  const results: PeerResults = {
    sizes,
    latencies: new Map(),
    idleRss: new Map(),
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
    results.redis = await redisAnswers(REDIS_URL);
    progress(
      `peers: databases (service with ${bulk + SLOT_TASKS} tasks)${results.redis ? '' : '; Redis not answering: no BullMQ'}`,
    );
    systems.push(await serviceSystem(options.postgresUrl, bulk, SLOT_TASKS));
    progress('peers: service ready');
    systems.push(await graphileWorkerSystem(options.postgresUrl));
    systems.push(await pgBossSystem(options.postgresUrl));
    if (results.redis) systems.push(await bullmqSystem(REDIS_URL));
    const serviceMarkers = Array.from({ length: SLOT_TASKS }, (_, i) => `svc-${bulk + i}`);

    for (let round = 1; round <= sizes.rounds; round++) {
      // One worker process per system and concurrency: the light measures (concurrency 8) and
      // the runs/s rows of that concurrency, the model's delay switched between them.
      for (const concurrency of [8, 32]) {
        const rows = wants('throughput') ? sizes.rows.filter((r) => r.concurrency === concurrency) : [];
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
          const child = await s.start({ concurrency, modelUrl });
          try {
            if (light) {
              const r = await lightLoad(s, child, modelUrl, { ...sizes, round });
              for (const l of r.latencies) push(results.latencies, s.name, l);
              push(results.idleRss, s.name, r.idleRssBytes);
              push(results.queuedRss, s.name, r.queuedRssBytes);
              const sorted = r.latencies.filter(Number.isFinite).sort((a, b) => a - b);
              progress(
                `  peers ${s.name} round ${round}: enqueue→start median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(1)} ms, idle RSS ${(r.idleRssBytes / 2 ** 20).toFixed(0)} MB, ${sizes.queued} queued ${(r.queuedRssBytes / 2 ** 20).toFixed(0)} MB`,
              );
            }
            if (!light) {
              // A fresh process's first jobs run cold (module loading, JIT): warmed untimed.
              await s.enqueueMany(WARM_UP);
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
            await child.stop();
          }
        }
      }
      await setModelDelay(modelUrl, 0);
      if (wants('slot')) {
        progress(`  peers slot round ${round}: waiting for the next minute`);
        const r: SlotResult = await slotToStart(systems, modelUrl, {
          count: SLOT_TASKS,
          round,
          deadlineMs: 40_000,
          serviceMarkers,
        });
        for (const [name, lags] of r) {
          for (const l of lags) push(results.slots, name, l);
          const sorted = [...lags].sort((a, b) => a - b);
          progress(
            `  peers ${name} slot round ${round}: median ${sorted[SLOT_TASKS / 2]?.toFixed(0)} ms, max ${sorted.at(-1)?.toFixed(0)} ms`,
          );
        }
      }
    }
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
