// Where a load's CPU time went, read from /proc (Linux): the server under test, the local
// PostgreSQL server's processes and the load generator (this process). On 2 cores these three
// share the machine, so a route's throughput is bounded by the CPU all three spend per request.
import { readdirSync, readFileSync } from 'node:fs';

/** Linux reports utime and stime in USER_HZ ticks, 100 per second on every architecture Node runs on. */
const MS_PER_TICK = 10;

/**
 * CPU time (user + system) a process has used, in ms, or undefined when it cannot be read.
 * With `children`, the time of its children that have exited and been waited for is added.
 */
export function processCpuMs(pid: number, children = false): number | undefined {
  try {
    // The command name may hold spaces and parentheses: the fields start after the last ') '.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    const own = Number(fields[11]) + Number(fields[12]);
    const waited = children ? Number(fields[13]) + Number(fields[14]) : 0;
    return (own + waited) * MS_PER_TICK;
  } catch {
    return undefined;
  }
}

/**
 * CPU time used so far by every process named `postgres` (the postmaster, its background
 * processes and the backends), with the time of those that have exited: the postmaster waits
 * for its children (an autovacuum worker, a closed connection's backend), and their time then
 * moves into its children's time, which is counted too.
 */
export function postgresCpuMs(): number | undefined {
  let total = 0;
  let found = false;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
    } catch {
      continue;
    }
    const ms = processCpuMs(Number(entry), true);
    if (ms === undefined) continue;
    total += ms;
    found = true;
  }
  return found ? total : undefined;
}

/** Whether a PostgreSQL URL names this machine, so that its processes can be read here. */
export function isLocalPostgres(url: string): boolean {
  try {
    const host = new URL(url).hostname;
    return host === '' || host === 'localhost' || host === '127.0.0.1' || host === '[::1]';
  } catch {
    return false;
  }
}

export interface CpuReading {
  server: number | undefined;
  postgres: number | undefined;
  loadGenerator: number;
}

/** Reads the CPU time of the server, of PostgreSQL (when counted) and of this process. */
export function readCpu(serverPid: number | undefined, countPostgres: boolean): CpuReading {
  const own = process.cpuUsage();
  return {
    server: serverPid === undefined ? undefined : processCpuMs(serverPid),
    postgres: countPostgres ? postgresCpuMs() : undefined,
    loadGenerator: (own.user + own.system) / 1000,
  };
}

/** CPU µs per request between two readings; undefined where either reading is missing. */
export function cpuPerRequest(before: CpuReading, after: CpuReading, requests: number): CpuReading {
  const per = (a: number | undefined, b: number | undefined) =>
    a === undefined || b === undefined || requests === 0 ? undefined : ((b - a) * 1000) / requests;
  return {
    server: per(before.server, after.server),
    postgres: per(before.postgres, after.postgres),
    loadGenerator: per(before.loadGenerator, after.loadGenerator) ?? Number.NaN,
  };
}
