// Shared pieces of the scheduler benchmark: throw-away PostgreSQL databases, child processes
// (the real entry point and the instant model server), organizations, small statistics.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Db } from '../src/db/db.ts';
import { databaseClock } from '../src/db/sql/time.ts';
import { createOrganization } from '../src/domain/organizations.ts';
import { SecretBox } from '../src/lib/secret-box.ts';
import {
  childEnv,
  createDatabase as createPostgresDatabase,
  START_ENV,
  START_NODE_ARGS,
} from './baselines.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const MODEL_SERVER = fileURLToPath(new URL('./scheduler-model-server.ts', import.meta.url));

/** Whether a PostgreSQL server answers at `url` (a short connect timeout). */
export async function postgresReachable(url: string): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    const [row] = (await c.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows;
    return row?.v ?? 'unknown';
  } catch {
    return undefined;
  } finally {
    await c.end().catch(() => undefined);
  }
}

export type BenchDatabase = Awaited<ReturnType<typeof createPostgresDatabase>>;

/** A new, empty database on the server of `baseUrl`; `drop()` removes it (connections forced off). */
export const createDatabase = (baseUrl: string): Promise<BenchDatabase> =>
  createPostgresDatabase(baseUrl, 'svc_bench_sched');

/** `count` organizations on the paid plan (no runsLimit), created as the admin API creates them. */
export async function createOrganizations(db: Db, secretKey: Buffer, count: number): Promise<string[]> {
  const deps = { db, clock: databaseClock, secretBox: new SecretBox(secretKey) };
  const ids: string[] = [];
  for (let i = 0; i < count; i += 10) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(10, count - i) }, (_, j) =>
        createOrganization(deps, { name: `Bench ${i + j + 1}`, plan: 'paid' }),
      ),
    );
    ids.push(...batch.map((b) => b.organization.id));
  }
  return ids;
}

export interface Child {
  child: ChildProcess;
  /** The last 64 KiB of output, for error messages. */
  tail(): string;
  stop(): Promise<void>;
}

function startChild(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  what: string,
  timeoutMs = 30_000,
): Promise<{ proc: Child; match: RegExpExecArray }> {
  const child = spawn(process.execPath, args, {
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  let scanned = '';
  const keep = (d: Buffer | string) => {
    tail = (tail + d).slice(-65_536);
  };
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const proc: Child = {
    child,
    tail: () => tail,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not start in time:\n${tail}`));
    }, timeoutMs);
    let found = false;
    child.stdout?.on('data', (d: Buffer) => {
      keep(d);
      if (found) return;
      // Only the start of the output is searched; after that, output is drained and dropped.
      scanned = (scanned + d).slice(-4096);
      const m = ready.exec(scanned);
      if (m) {
        found = true;
        clearTimeout(timer);
        resolve({ proc, match: m });
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      if (!found) reject(new Error(`${what} exited before it was ready:\n${tail}`));
    });
  });
}

/** The instant model provider in a process of its own; resolves with its base URL. */
export async function startModelServer(): Promise<{ url: string; proc: Child }> {
  const { proc, match } = await startChild([MODEL_SERVER], {}, /listening (http:\/\/\S+)/, 'model server');
  return { url: match[1] ?? '', proc };
}

/**
 * The real entry point as `npm start` runs it (its environment and node options, `src/main.ts`) with exactly
 * `env`; resolves once it listens. `nodeArgs` go before the script (e.g. --cpu-prof).
 */
export async function startServiceProcess(
  env: Record<string, string>,
  nodeArgs: string[] = [],
): Promise<Child> {
  const { proc } = await startChild(
    [...START_NODE_ARGS, ...nodeArgs, MAIN],
    { ...START_ENV, PORT: '0', ...env },
    /Server listening at http:\/\/\S+/,
    'service process',
  );
  return proc;
}

export function median(values: readonly number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return Number.NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? (v[mid] ?? Number.NaN) : ((v[mid - 1] ?? 0) + (v[mid] ?? 0)) / 2;
}

/** A number for a table cell: rounded, or an em dash when missing. */
export function fmt(n: number | undefined, digits = 0): string {
  if (n === undefined || !Number.isFinite(n)) return '—';
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
