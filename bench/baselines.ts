// The child processes of the API and run-engine benchmarks, and the helpers those parts share
// to start and stop them. Every server the benchmarks measure runs in a process of its own, so
// the load generator (autocannon, in the bench process) never shares an event loop with it.
//
// Runnable as a child:
//   node bench/baselines.ts hello <port>                bare Fastify, GET / answers a JSON object
//   node bench/baselines.ts pk-pglite <port> [dataDir]  bare Fastify, GET /plain/:id = one
//                                                       primary-key SELECT of a plain task-sized
//                                                       row through PGlite; GET /items/:id the
//                                                       same of a task-shaped row; the
//                                                       floors GET /items?organizationId= (20
//                                                       rows) and POST /items (one INSERT)
//   node bench/baselines.ts pk-pg <port> <url>          the same through a pg Pool (10 clients)
//   node bench/baselines.ts model <port> <delayMs>      a Chat Completions stand-in that answers
//                                                       after delayMs; GET /stats: in flight, served;
//                                                       GET /arrivals: when each `probe:<marker>`
//                                                       request and the first request arrived (wall
//                                                       clock, ms), then forgets them (not with ?keep=1);
//                                                       POST /delay/<ms> changes the delay
// Each prints one line `ready <json>` on stdout when it listens (with `url`, and for pk-* the
// `plainId` and `id` of rows to read and the `listOrganizationId` whose rows the list floor reads).
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { FLOOR_BATCH_IN_FLIGHT, insertBatcher, type Query } from './floor-batcher.ts';

const SELF = fileURLToPath(import.meta.url);
const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
/** `npm start` (package.json): `[NAME=value …] node [--options] src/start.mjs`. */
const START = (() => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    scripts: { start: string };
  };
  // src/start.mjs checks the Node.js version and loads src/main.ts, which is run here directly.
  const m = /^((?:[A-Z_]+=[^ ]+ )*)node((?: --[^ ]+)*) src\/start\.mjs$/.exec(pkg.scripts.start);
  if (!m)
    throw new Error(
      `package.json's start script is not "[NAME=value …] node [--options] src/start.mjs": ${pkg.scripts.start}`,
    );
  const words = (s: string | undefined) => s?.trim().split(' ').filter(Boolean) ?? [];
  return {
    env: Object.fromEntries(words(m[1]).map((pair) => pair.split('=', 2) as [string, string])),
    nodeArgs: words(m[2]),
  };
})();

/**
 * The node options of `npm start`, so the service measured runs as it is run; BENCH_NODE_ARGS
 * (space-separated, e.g. `--max-semi-space-size=16`) replaces them, to measure the service
 * under other options.
 */
export const START_NODE_ARGS =
  process.env.BENCH_NODE_ARGS !== undefined
    ? process.env.BENCH_NODE_ARGS.split(' ').filter(Boolean)
    : START.nodeArgs;

/** The environment `npm start` sets (MALLOC_ARENA_MAX), given to every service process measured. */
export const START_ENV: Readonly<Record<string, string>> = START.env;

export const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function median(values: readonly number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return Number.NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? (v[mid] as number) : ((v[mid - 1] as number) + (v[mid] as number)) / 2;
}

/** A number for a table: integers above 100, else three significant digits. */
export function fmt(n: number | undefined, digits = 3): string {
  if (n === undefined || !Number.isFinite(n)) return 'n/a';
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString('en-US');
  return Number(n.toPrecision(digits)).toString();
}

export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Progress on stderr, with the time since the bench started. */
const started = Date.now();
export function progress(message: string): void {
  process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${message}\n`);
}

export async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  await new Promise<void>((r) => server.close(() => r()));
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A fresh database on the PostgreSQL server of `baseUrl`, dropped by drop(). */
export async function createDatabase(
  baseUrl: string,
  prefix: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(baseUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: baseUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export interface Child {
  proc: ChildProcess;
  pid: number;
  url: string;
  /** What the child printed on its ready line (baselines). */
  info: Record<string, unknown>;
  stderr(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

const running = new Set<ChildProcess>();
let exitHooked = false;
function track(proc: ChildProcess): void {
  running.add(proc);
  proc.on('exit', () => running.delete(proc));
  if (exitHooked) return;
  exitHooked = true;
  // A bench that fails or is interrupted must not leave servers behind.
  process.on('exit', () => {
    for (const p of running) p.kill('SIGKILL');
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      for (const p of running) p.kill('SIGKILL');
      process.exit(130);
    });
  }
}

/**
 * The environment every child process of the benchmarks starts from. Node's compile cache is on
 * (the directory src/start.mjs uses by default), as it is for `npm start`: a process started
 * with it, after the first, neither loads the TypeScript type stripper (about 15 MB that the
 * process keeps) nor compiles its modules again. The service and the peers' workers, all
 * TypeScript run directly here, are then measured like with like, as a start of `npm start`
 * or of a JavaScript worker would be.
 */
export function childEnv(env: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE || join(tmpdir(), 'node-compile-cache'),
    ...env,
  };
}

function spawnNode(args: string[], env: Record<string, string>, stdout: 'pipe' | 'ignore') {
  const proc = spawn(process.execPath, args, {
    env: childEnv(env),
    stdio: ['ignore', stdout, 'pipe'],
  });
  track(proc);
  let err = '';
  proc.stderr?.on('data', (d) => {
    err = (err + d).slice(-20_000);
  });
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  const stop = async (graceMs = 60_000) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  return { proc, exited, stderr: () => err, stop };
}

/** Starts `node bench/baselines.ts <mode> <port> [arg]` and waits for its ready line. */
export async function startBaseline(mode: string, arg?: string): Promise<Child> {
  const port = await freePort();
  const c = spawnNode([SELF, mode, String(port), ...(arg === undefined ? [] : [arg])], {}, 'pipe');
  const info = await new Promise<Record<string, unknown>>((resolveReady, reject) => {
    let out = '';
    const timer = setTimeout(
      () => reject(new Error(`baseline ${mode} did not start:\n${c.stderr()}`)),
      60_000,
    );
    c.proc.stdout?.on('data', (d) => {
      out += d;
      const m = /^ready (.*)$/m.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolveReady(JSON.parse(m[1]) as Record<string, unknown>);
      }
    });
    void c.exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`baseline ${mode} exited with ${code}:\n${c.stderr()}`));
    });
  });
  // Nothing more is read from stdout: let it drain.
  c.proc.stdout?.resume();
  return { proc: c.proc, pid: c.proc.pid ?? 0, url: String(info.url), info, stderr: c.stderr, stop: c.stop };
}

export interface ServiceProcessOptions {
  /** Extra arguments for node before the script (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /** The script to run instead of src/main.ts (it must take the same environment), and its arguments. */
  script?: string;
  args?: string[];
}

/**
 * Starts the service as `npm start` runs it (`node` with the start script's environment and options, `src/main.ts`) with exactly `env` plus a free
 * PORT, and waits until /healthz answers. Its stdout (one JSON log line per request at the
 * default level, info) goes to /dev/null.
 */
export async function startServiceProcess(
  env: Record<string, string>,
  options: ServiceProcessOptions = {},
): Promise<Child> {
  const port = await freePort();
  const c = spawnNode(
    [...START_NODE_ARGS, ...(options.nodeArgs ?? []), options.script ?? MAIN, ...(options.args ?? [])],
    { ...START_ENV, HOST: '127.0.0.1', PORT: String(port), ...env },
    'ignore',
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (c.proc.exitCode !== null) throw new Error(`service exited with ${c.proc.exitCode}:\n${c.stderr()}`);
    if (Date.now() > deadline) {
      c.proc.kill('SIGKILL');
      throw new Error(`service did not start in time:\n${c.stderr()}`);
    }
    try {
      const res = await fetch(`${url}/healthz`);
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    await sleep(50);
  }
  return { proc: c.proc, pid: c.proc.pid ?? 0, url, info: {}, stderr: c.stderr, stop: c.stop };
}

/** The environment every service process of the benchmarks gets. */
export function serviceEnv(
  backend: { databaseUrl?: string | undefined; dataDir?: string | undefined },
  secretKey: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    SVC_ADMIN_TOKEN: ADMIN_TOKEN,
    SVC_SECRET_KEY: secretKey,
    SVC_CREATE_DEMO_ORG: 'false',
    // The create rounds give one organization tens of thousands of tasks, far past the default
    // per-organization caps; raised, as the task limit is, so that every create is measured.
    SVC_MAX_TASKS_PER_ORG: '1000000',
    SVC_MAX_DESTINATIONS_PER_ORG: '1000000',
    SVC_MAX_TASK_PROMPT_MB_PER_ORG: '10000',
    ...(backend.databaseUrl
      ? { DATABASE_URL: backend.databaseUrl }
      : { SVC_DATA_DIR: backend.dataDir ?? '' }),
    ...extra,
  };
}

export function newSecretKey(): string {
  return randomBytes(32).toString('base64');
}

/** One JSON request to the service; throws unless the status is `expect`. */
export async function callJson<T>(
  url: string,
  options: { method?: string; auth: string; body?: unknown; expect: number },
): Promise<T> {
  const res = await fetch(url, {
    method: options.method ?? 'GET',
    headers: {
      authorization: `Bearer ${options.auth}`,
      ...(options.body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(options.body !== undefined && { body: JSON.stringify(options.body) }),
  });
  const text = await res.text();
  if (res.status !== options.expect) {
    throw new Error(`${options.method ?? 'GET'} ${url}: ${res.status} ${text.slice(0, 500)}`);
  }
  return (text ? JSON.parse(text) : undefined) as T;
}

/**
 * A paid organization with its rate limit and task limit raised through the admin API, so that
 * neither 429s nor 403s pollute a measurement.
 */
export async function createPaidOrganization(
  serviceUrl: string,
  name: string,
): Promise<{ organizationId: string; apiKey: string }> {
  const org = await callJson<{ organizationId: string; apiKey: string }>(
    `${serviceUrl}/api/admin/organizations`,
    { method: 'POST', auth: ADMIN_TOKEN, body: { name, plan: 'paid' }, expect: 201 },
  );
  await callJson(`${serviceUrl}/api/admin/organizations/${org.organizationId}`, {
    method: 'PATCH',
    auth: ADMIN_TOKEN,
    body: { rateLimitPerMinute: 1_000_000, tasksLimit: 1_000_000_000, runsLimit: 'unlimited' },
    expect: 200,
  });
  return org;
}

/** A weekly task in a timezone (the body the API benchmark's POST sends too). */
export function weeklyTaskBody(organizationId: string, n: number): Record<string, unknown> {
  return {
    organizationId,
    name: `Weekly digest ${n}`,
    prompt: 'Summarise the week in five bullet points.',
    schedule: 'weekly',
    scheduleDays: ['monday', 'thursday'],
    scheduleTime: '08:30',
    timezone: 'Europe/Berlin',
  };
}

/** Runs `fn` over `items` with at most `concurrency` at once. */
export async function mapConcurrent<T, R>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      for (;;) {
        const i = next++;
        if (i >= items.length) return;
        results[i] = await fn(items[i] as T, i);
      }
    }),
  );
  return results;
}

/** Resident set size and its peak (VmHWM) of a process, in bytes (Linux /proc). */
export function processMemory(pid: number): { rss: number; peak: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rss: kb('VmRSS') * 1024, peak: kb('VmHWM') * 1024 };
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// The child servers
// ---------------------------------------------------------------------------------------------

/** A row shaped like a task row, so the baseline serialises about as much as the service. */
const ITEMS_DDL = `CREATE TABLE IF NOT EXISTS bench_items (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL,
  name text NOT NULL,
  prompt text NOT NULL,
  model text NOT NULL,
  schedule text NOT NULL,
  schedule_time text,
  schedule_days text[],
  timezone text NOT NULL,
  status text NOT NULL,
  next_run_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
)`;
const ITEMS_INDEX = 'CREATE INDEX IF NOT EXISTS bench_items_org ON bench_items (organization_id, created_at)';
const ITEM_INSERT = `INSERT INTO bench_items
  (id, organization_id, name, prompt, model, schedule, schedule_time, schedule_days, timezone, status, next_run_at)
  VALUES ($1, $2, $3, 'Summarise the week in five bullet points.', 'openai/gpt-4o-mini', 'weekly', '08:30',
          ARRAY['monday','thursday'], 'Europe/Berlin', 'active', now() + interval '3 days')
  RETURNING *`;
const ITEM_SELECT = 'SELECT * FROM bench_items WHERE id = $1';
/**
 * The primary-key baseline's row: as many bytes as a task's, in text and uuid columns only,
 * which the driver hands over as strings (no array, timestamp or JSON column to parse). The
 * lightest reasonable row a bare route would read: what the service's single-task read is
 * measured against.
 */
const PLAIN_DDL = `CREATE TABLE IF NOT EXISTS bench_plain (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL,
  name text NOT NULL,
  prompt text NOT NULL,
  model text NOT NULL,
  schedule text NOT NULL,
  schedule_time text,
  schedule_days text,
  timezone text NOT NULL,
  status text NOT NULL
)`;
const PLAIN_INSERT = `INSERT INTO bench_plain
  (id, organization_id, name, prompt, model, schedule, schedule_time, schedule_days, timezone, status)
  VALUES ($1, $2, $3, 'Summarise the week in five bullet points.', 'openai/gpt-4o-mini', 'weekly', '08:30',
          'monday,thursday', 'Europe/Berlin', 'active')`;
const PLAIN_SELECT = 'SELECT * FROM bench_plain WHERE id = $1';
const ITEMS_OF_ORGANIZATION =
  'SELECT * FROM bench_items WHERE organization_id = $1 ORDER BY created_at DESC, id DESC';
/** Rows of the organization the floor of the list reads, as many as the service's list has tasks. */
export const FLOOR_LIST_SIZE = 20;

/**
 * The primary-key baseline, and the floors of the list and the create: the least a bare route
 * can do for the same work through the same driver (the rows of one organization in one
 * SELECT; one INSERT of a task-shaped row, committed on its own; the same INSERT batched as the
 * service batches creates, POST /items/batched). Nothing is validated,
 * authenticated, counted or logged.
 */
async function pkServer(
  port: number,
  open: () => Promise<{ query: Query; version: string; maxConcurrency: number }>,
) {
  const { default: Fastify } = await import('fastify');
  const db = await open();
  const insertBatched = insertBatcher(db.query, Math.min(FLOOR_BATCH_IN_FLIGHT, db.maxConcurrency));
  await db.query(ITEMS_DDL);
  await db.query(ITEMS_INDEX);
  await db.query(PLAIN_DDL);
  const org = randomUUID();
  const listOrg = randomUUID();
  let id = '';
  for (let i = 0; i < 100; i++) {
    id = randomUUID();
    await db.query(ITEM_INSERT, [id, org, `Weekly digest ${i}`]);
  }
  for (let i = 0; i < FLOOR_LIST_SIZE; i++) {
    await db.query(ITEM_INSERT, [randomUUID(), listOrg, `Weekly digest ${i}`]);
  }
  let plainId = '';
  for (let i = 0; i < 100; i++) {
    plainId = randomUUID();
    await db.query(PLAIN_INSERT, [plainId, org, `Weekly digest ${i}`]);
  }
  const app = Fastify({ logger: false });
  app.get<{ Params: { id: string } }>('/items/:id', async (request, reply) => {
    const [row] = await db.query(ITEM_SELECT, [request.params.id]);
    if (!row) return reply.code(404).send({ error: 'not found' });
    return row;
  });
  app.get<{ Params: { id: string } }>('/plain/:id', async (request, reply) => {
    const [row] = await db.query(PLAIN_SELECT, [request.params.id]);
    if (!row) return reply.code(404).send({ error: 'not found' });
    return row;
  });
  app.get<{ Querystring: { organizationId: string } }>('/items', async (request) => ({
    items: await db.query(ITEMS_OF_ORGANIZATION, [request.query.organizationId]),
  }));
  app.post<{ Body: { organizationId: string; name: string } }>('/items', async (request, reply) => {
    const [row] = await db.query(ITEM_INSERT, [randomUUID(), request.body.organizationId, request.body.name]);
    return reply.code(201).send(row);
  });
  app.post<{ Body: { organizationId: string; name: string } }>('/items/batched', async (request, reply) => {
    const row = await insertBatched(request.body.organizationId, request.body.name);
    return reply.code(201).send(row);
  });
  const url = await app.listen({ host: '127.0.0.1', port });
  return { url, id, plainId, listOrganizationId: listOrg, serverVersion: db.version };
}

/** Wall-clock time in ms with sub-millisecond precision, comparable between processes of this machine. */
export const wallMs = () => performance.timeOrigin + performance.now();

async function modelServer(port: number, initialDelayMs: number) {
  let delayMs = initialDelayMs;
  let inFlight = 0;
  let served = 0;
  // The peers benchmark tags requests with `probe:<marker>` in the prompt and reads back when
  // each arrived, so that enqueue → start is timed where the work starts: at the model.
  let arrivals: Record<string, number> = {};
  let firstAt: number | undefined;
  const usage = { prompt_tokens: 100, completion_tokens: 5, total_tokens: 105 };
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/stats') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ inFlight, served }));
      return;
    }
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => {
      raw += d;
    });
    req.on('end', () => {
      // The peers benchmark keeps its worker processes across a change of model speed.
      const delay = /^\/delay\/(\d+)$/.exec(req.url ?? '')?.[1];
      if (req.method === 'POST' && delay !== undefined) {
        delayMs = Number(delay);
        res.writeHead(204);
        res.end();
        return;
      }
      if (req.method === 'GET' && req.url?.startsWith('/arrivals')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ arrivals, firstAt: firstAt ?? null }));
        if (req.url.endsWith('?keep=1')) return;
        arrivals = {};
        firstAt = undefined;
        return;
      }
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"not found"}}');
        return;
      }
      const at = wallMs();
      firstAt ??= at;
      const marker = raw.includes('probe:') ? /probe:([\w.-]+)/.exec(raw)?.[1] : undefined;
      if (marker && arrivals[marker] === undefined) arrivals[marker] = at;
      const body = JSON.parse(raw) as { model: string; stream?: boolean };
      inFlight++;
      let timer: NodeJS.Timeout | undefined;
      // A caller that gives up (a worker stopped) no longer counts as in flight.
      res.on('close', () => {
        if (!timer) return;
        clearTimeout(timer);
        timer = undefined;
        inFlight--;
      });
      const answer = () => {
        timer = undefined;
        inFlight--;
        served++;
        if (res.destroyed) return;
        const id = `chatcmpl-${served}`;
        const created = Math.floor(Date.now() / 1000);
        if (body.stream) {
          const chunk = (o: object) =>
            `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: body.model, ...o })}\n\n`;
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.end(
            chunk({
              choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
            }) +
              chunk({ choices: [{ index: 0, delta: { content: 'Done.' }, finish_reason: null }] }) +
              chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }) +
              chunk({ choices: [], usage }) +
              'data: [DONE]\n\n',
          );
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id,
            object: 'chat.completion',
            created,
            model: body.model,
            choices: [{ index: 0, message: { role: 'assistant', content: 'Done.' }, finish_reason: 'stop' }],
            usage,
          }),
        );
      };
      if (delayMs > 0) timer = setTimeout(answer, delayMs);
      else answer();
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen({ port, host: '127.0.0.1', backlog: 4096 }, r));
  return { url: `http://127.0.0.1:${port}/v1` };
}

async function main(argv: string[]): Promise<void> {
  const [mode, portArg, arg] = argv;
  const port = Number(portArg);
  let ready: Record<string, unknown>;
  switch (mode) {
    case 'hello': {
      const { default: Fastify } = await import('fastify');
      const app = Fastify({ logger: false });
      app.get('/', async () => ({ hello: 'world' }));
      ready = { url: await app.listen({ host: '127.0.0.1', port }) };
      break;
    }
    case 'pk-pglite': {
      const { PGlite } = await import('@electric-sql/pglite');
      ready = await pkServer(port, async () => {
        const db = await PGlite.create(arg ? { dataDir: arg } : {});
        const version = (await db.query<{ server_version: string }>('SHOW server_version')).rows[0];
        return {
          version: version?.server_version ?? 'unknown',
          query: async (sql, params = []) => (await db.query(sql, params)).rows,
          // One connection: one statement at a time, as the service's PGlite profile.
          maxConcurrency: 1,
        };
      });
      break;
    }
    case 'pk-pg': {
      if (!arg) throw new Error('pk-pg needs a database URL');
      const pool = new pg.Pool({ connectionString: arg, max: 10 });
      ready = await pkServer(port, async () => ({
        version:
          (await pool.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? '',
        query: async (sql, params = []) => (await pool.query(sql, params)).rows,
        maxConcurrency: 10,
      }));
      break;
    }
    case 'model':
      ready = await modelServer(port, Number(arg ?? 0));
      break;
    default:
      throw new Error(`usage: node bench/baselines.ts hello|pk-pglite|pk-pg|model <port> [arg]`);
  }
  process.stdout.write(`ready ${JSON.stringify(ready)}\n`);
  process.on('SIGTERM', () => process.exit(0));
}

if (process.argv[1] && resolve(process.argv[1]) === SELF) await main(process.argv.slice(2));
