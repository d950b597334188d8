// The measures of the peers benchmark, each on one system at a time (the slot measure on all at
// once): enqueue → start and memory at light load, runs/s with CPU per run, slot → start.
import { readdirSync, readFileSync } from 'node:fs';
import { type Child, processMemory, sleep, wallMs } from './baselines.ts';
import { processCpuMs } from './cpu.ts';
import type { BenchSystem } from './peers-systems.ts';

/** A model stand-in (bench/baselines.ts `model`) and what it recorded since the last look. */
export async function arrivals(modelUrl: string, keep = false) {
  const res = await fetch(`${modelUrl.replace(/\/v1$/, '')}/arrivals${keep ? '?keep=1' : ''}`);
  return (await res.json()) as { arrivals: Record<string, number>; firstAt: number | null };
}

export interface LightResult {
  /** Enqueue → model request received, ms, one per probe (NaN: never arrived). */
  latencies: number[];
  idleRssBytes: number;
  /** The largest RSS sampled while 1,000 queued jobs drained. */
  queuedRssBytes: number;
}

/**
 * One worker process (concurrency 8, instant model): its RSS once settled with nothing to do;
 * then `probes` jobs added one at a time, `gapMs` apart (light load: each has started long
 * before the next); then `queued` jobs at once, RSS sampled until they are done.
 */
export async function lightLoad(
  system: BenchSystem,
  child: Child,
  modelUrl: string,
  o: {
    probes: number;
    gapMs: number;
    /** Jobs added the system's own way, untimed, before the probes (after the idle RSS). */
    probeWarmUp: number;
    /** 0: the RSS with jobs queued is not measured (queuedRssBytes NaN). */
    queued: number;
    round: number;
    /** Called right after the idle RSS is read (other processes read at the same moment). */
    onIdle?: () => Promise<void>;
  },
): Promise<LightResult> {
  {
    await sleep(2000);
    const idleRssBytes = processMemory(child.pid)?.rss ?? Number.NaN;
    await o.onIdle?.();
    // A process that has just started runs its code cold: the service's probes go through its
    // HTTP API, whose hooks, validation and serialisation V8 has not yet compiled for speed
    // (measured: run now -> model request 3.6-3.7 ms in a fresh process, 2.8-3.0 after 1,000
    // run-nows, 2.8 after 2,000). A system runs for days; each is warmed the same way, by jobs
    // added as its probes are, 8 at a time, and drained before the first probe.
    await warmUpEnqueue(system, o.probeWarmUp, o.probes);
    await arrivals(modelUrl);
    const sent: [string, number][] = [];
    for (let i = 0; i < o.probes; i++) {
      const marker = system.name === 'service' ? `svc-${i}` : `${system.prefix}r${o.round}-${i}`;
      const t0 = wallMs();
      await system.enqueue(marker);
      sent.push([marker, t0]);
      await sleep(o.gapMs);
    }
    await sleep(500);
    const got = (await arrivals(modelUrl)).arrivals;
    const latencies = sent.map(([m, t0]) => (got[m] === undefined ? Number.NaN : (got[m] as number) - t0));
    if (!o.queued) return { latencies, idleRssBytes, queuedRssBytes: Number.NaN };
    let queuedRssBytes = processMemory(child.pid)?.rss ?? 0;
    const sampler = setInterval(() => {
      queuedRssBytes = Math.max(queuedRssBytes, processMemory(child.pid)?.rss ?? 0);
    }, 50);
    try {
      await system.enqueueMany(o.queued);
      await drained(system, 120_000);
    } finally {
      clearInterval(sampler);
    }
    return { latencies, idleRssBytes, queuedRssBytes };
  }
}

/**
 * `n` jobs added through `system.enqueue`, 8 at a time, then drained. The service's markers
 * name its tasks by index: those after the probes' (`from`), one run each.
 */
async function warmUpEnqueue(system: BenchSystem, n: number, from: number): Promise<void> {
  if (n <= 0) return;
  let next = 0;
  const lane = async () => {
    for (let k = next++; k < n; k = next++) {
      await system.enqueue(system.name === 'service' ? `svc-${from + k}` : `${system.prefix}w-${k}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, lane));
  await drained(system, 120_000);
  await sleep(500);
}

/** Sets the model stand-in's answer delay. */
export async function setModelDelay(modelUrl: string, ms: number): Promise<void> {
  const res = await fetch(`${modelUrl.replace(/\/v1$/, '')}/delay/${ms}`, { method: 'POST' });
  await res.arrayBuffer();
}

export async function drained(system: BenchSystem, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await system.remaining()) > 0) {
    if (Date.now() > deadline) throw new Error(`${system.name}: jobs not done in ${timeoutMs / 1000} s`);
    await sleep(25);
  }
}

function redisPid(): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'redis-server') return Number(entry);
    } catch {
      // gone
    }
  }
  return undefined;
}

/** CPU ms of each process, by pid (missing: exited or unreadable). */
function cpuOf(pids: number[]): Map<number, number> {
  const m = new Map<number, number>();
  for (const pid of pids) {
    const ms = processCpuMs(pid);
    if (ms !== undefined) m.set(pid, ms);
  }
  return m;
}

export interface ThroughputResult {
  runsPerSecond: number;
  /** CPU ms per run of the worker process. */
  processCpuMs: number;
  /** CPU ms per run of the database server's backends serving it (BullMQ: redis-server). */
  databaseCpuMs: number;
}

/**
 * `units` jobs through one worker process at `concurrency`: the process is started idle, the
 * jobs are queued at once (one transaction; one pipeline on Redis), and runs/s is the units
 * over the span from the first model request received to the moment none is left (polled
 * every 25 ms). CPU is read from /proc from the end of the enqueue to the end.
 */
export async function throughput(
  system: BenchSystem,
  child: Child,
  /** The database backends that are the bench's own (read before the worker started). */
  own: Set<number>,
  modelUrl: string,
  o: { units: number },
): Promise<ThroughputResult> {
  {
    await sleep(500);
    await arrivals(modelUrl);
    await system.enqueueMany(o.units);
    const redis = system.postgres ? undefined : redisPid();
    const database = async () =>
      redis === undefined ? (await system.backendPids()).filter((p) => !own.has(p)) : [redis];
    const processBefore = processCpuMs(child.pid) ?? Number.NaN;
    const dbBefore = cpuOf(await database());
    await drained(system, 300_000);
    const end = wallMs();
    const processAfter = processCpuMs(child.pid) ?? Number.NaN;
    const dbAfter = cpuOf(await database());
    let dbMs = 0;
    for (const [pid, ms] of dbAfter) dbMs += ms - (dbBefore.get(pid) ?? 0);
    const { firstAt } = await arrivals(modelUrl);
    if (firstAt === null) throw new Error(`${system.name}: no model request`);
    return {
      runsPerSecond: o.units / ((end - firstAt) / 1000),
      processCpuMs: (processAfter - processBefore) / o.units,
      databaseCpuMs: dbMs / o.units,
    };
  }
}

/** Start lag (ms) of each system's `count` jobs due at one time. */
export type SlotResult = Map<string, number[]>;

/**
 * Slot → start: every system's worker process at once (each on its own database or key
 * prefix), `count` jobs each. The peers' jobs are due every minute (crontab / schedule / job
 * scheduler: they know only minutes) and measured at the first minute boundary at least 6 s
 * after all processes are up; the service's tasks at a slot 2 s after that, so they are done
 * before the peers' minute. Waits until every job has started or `deadlineMs` after the minute.
 */
export async function slotToStart(
  systems: BenchSystem[],
  modelUrl: string,
  o: { count: number; round: number; deadlineMs: number; serviceMarkers: string[] },
): Promise<SlotResult> {
  const markers = new Map(
    systems.map((s) => [
      s.name,
      s.name === 'service'
        ? o.serviceMarkers
        : Array.from({ length: o.count }, (_, i) => `${s.prefix}slot-r${o.round}-${i}`),
    ]),
  );
  await arrivals(modelUrl);
  const children = await Promise.all(
    systems.map((s) =>
      s.name === 'service'
        ? s.start({ concurrency: 8, modelUrl })
        : s.start({ concurrency: 8, modelUrl, cronMarkers: markers.get(s.name) ?? [] }),
    ),
  );
  try {
    // The peers' recurring jobs are due every minute from now on: the first minute boundary far
    // enough away for the service's slot, 2 s from now, to be over before it.
    const minute = Math.ceil((Date.now() + 6000) / 60_000) * 60_000;
    const serviceSlot = new Date(Math.ceil((Date.now() + 2000) / 1000) * 1000);
    const service = systems.find((s) => s.name === 'service');
    await service?.armSlot?.(o.serviceMarkers, serviceSlot);
    // The service's runs are read just before the minute, and what arrived until then forgotten:
    // pg-boss sends a schedule's occurrence of the minute before at once when it registers it.
    await sleep(Math.max(0, minute - 1500 - Date.now()));
    const before = (await arrivals(modelUrl)).arrivals;
    const all = [...markers.entries()].filter(([n]) => n !== 'service').flatMap(([, m]) => m);
    let got: Record<string, number> = {};
    while (Date.now() < minute + o.deadlineMs) {
      got = (await arrivals(modelUrl, true)).arrivals;
      if (all.every((m) => got[m] !== undefined)) break;
      await sleep(250);
    }
    await arrivals(modelUrl);
    for (const m of o.serviceMarkers) if (before[m] !== undefined) got[m] = before[m];
    const result: SlotResult = new Map();
    for (const s of systems) {
      const base = s.name === 'service' ? serviceSlot.getTime() : minute;
      result.set(
        s.name,
        (markers.get(s.name) ?? []).map((m) =>
          got[m] === undefined ? Number.POSITIVE_INFINITY : (got[m] as number) - base,
        ),
      );
    }
    return result;
  } finally {
    await Promise.all(children.map((c) => c.stop()));
  }
}
