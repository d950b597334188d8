// Shared pieces of the fault tests: a backend for child processes (a data directory or a fresh
// PostgreSQL database), JSON calls over real HTTP, and a TCP proxy that can cut the database off.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openPglite } from '../../src/db/pglite.ts';
import { createPostgresDatabase, seededDataDir, TEST_DATABASE_URL } from '../helpers/db.ts';
import type { ServerProcess } from '../helpers/process.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';

export type Org = { organizationId: string; apiKey: string };

export interface Reply {
  status: number;
  headers: Headers;
  body: any;
}

/** One JSON request to a running process. `key` is an API key; `admin` sends the operator token. */
export async function call(
  base: string,
  method: string,
  path: string,
  o: { key?: string; admin?: boolean; body?: unknown } = {},
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.admin) headers.authorization = `Bearer ${ADMIN_TOKEN}`;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, {
    method,
    headers,
    ...(o.body !== undefined && { body: JSON.stringify(o.body) }),
  });
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status: res.status, headers: res.headers, body };
}

/** A paid organization without task or rate limits in the way of a test. */
export async function createOrg(base: string): Promise<Org> {
  const res = await call(base, 'POST', '/api/admin/organizations', {
    admin: true,
    body: { name: `Faults ${randomBytes(3).toString('hex')}`, plan: 'paid' },
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const org = res.body as Org;
  const patched = await call(base, 'PATCH', `/api/admin/organizations/${org.organizationId}`, {
    admin: true,
    body: { tasksLimit: 1000, rateLimitPerMinute: 100000 },
  });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
  return org;
}

/** A task through the API; daily far from now unless `extra` says otherwise (`schedule: 'once'` runs at once). */
export async function createTask(base: string, org: Org, extra: Record<string, unknown> = {}) {
  const res = await call(base, 'POST', '/api/svc/tasks', {
    key: org.apiKey,
    body: {
      organizationId: org.organizationId,
      name: 'Fault task',
      prompt: `Prompt ${randomUUID()}`,
      schedule: 'daily',
      ...extra,
    },
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body as { id: string; name: string; prompt: string };
}

export async function runNow(base: string, org: Org, taskId: string): Promise<string> {
  const res = await call(base, 'POST', `/api/svc/tasks/${taskId}/run`, { key: org.apiKey });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body.id;
}

export async function runsOfTask(base: string, org: Org, taskId: string): Promise<any[]> {
  const res = await call(base, 'GET', `/api/svc/tasks/${taskId}/runs`, { key: org.apiKey });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** The run once it is finished and its deliveries settled (deliveryStatus no longer pending). */
export function settledRun(base: string, org: Org, runId: string, timeoutMs = 30_000) {
  return waitFor(
    `run ${runId} to finish and be delivered`,
    async () => {
      const res = await call(base, 'GET', `/api/svc/runs/${runId}`, { key: org.apiKey });
      const run = res.body;
      return res.status === 200 &&
        ['completed', 'failed'].includes(run.status) &&
        run.deliveryStatus !== 'pending'
        ? run
        : undefined;
    },
    { timeoutMs, everyMs: 100 },
  );
}

/** SIGTERM, then the exit code; SIGKILL after `deadlineMs` turns a hang into a failure. */
export async function terminate(server: ServerProcess, deadlineMs = 20_000): Promise<number | null> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return server.child.exitCode;
  server.child.kill('SIGTERM');
  const timer = setTimeout(() => server.child.kill('SIGKILL'), deadlineMs);
  const code = await server.exited;
  clearTimeout(timer);
  return code;
}

export async function kill(server: ServerProcess): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGKILL');
  await server.exited;
}

/**
 * Where the processes of one test keep their data: a fresh PostgreSQL database with
 * TEST_DATABASE_URL, else a data directory on disk. `query` reads it from the test: through its
 * own connection on PostgreSQL, by opening the directory on PGlite (only while no service
 * process has it open).
 */
export interface Backend {
  env: Record<string, string>;
  /** The database URL (PostgreSQL only). */
  url: string | undefined;
  dataDir: string | undefined;
  query<R = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<R[]>;
  dispose(): Promise<void>;
}

export async function createBackend(): Promise<Backend> {
  const base = { SVC_ADMIN_TOKEN: ADMIN_TOKEN, SVC_CREATE_DEMO_ORG: 'false', SVC_LOG_LEVEL: 'info' };
  if (TEST_DATABASE_URL) {
    const db = await createPostgresDatabase();
    return {
      env: { ...base, DATABASE_URL: db.url, SVC_SECRET_KEY: randomBytes(32).toString('base64') },
      url: db.url,
      dataDir: undefined,
      async query<R>(sql: string, params: unknown[] = []) {
        const client = new pg.Client({ connectionString: db.url });
        await client.connect();
        try {
          return (await client.query(sql, params)).rows as R[];
        } finally {
          await client.end();
        }
      },
      dispose: db.drop,
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'svc-faults-'));
  const dataDir = await seededDataDir(dir);
  return {
    env: { ...base, SVC_DATA_DIR: dataDir },
    url: undefined,
    dataDir,
    async query<R>(sql: string, params: unknown[] = []) {
      const db = await openPglite(dataDir);
      try {
        return await db.query<R>(sql, params);
      } finally {
        await db.close();
      }
    },
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * A TCP proxy in front of PostgreSQL. `cut()` is the outage as the service sees it when the
 * server goes down: every open connection is reset and new ones are refused (nothing listens on
 * the port); `restore()` listens on the same port again and forwards as before.
 */
export interface TcpProxy {
  port: number;
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const handle = (client: Socket) => {
    const upstream = connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  };
  const listen = (port: number) =>
    new Promise<Server>((resolve, reject) => {
      const server = createServer(handle);
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve(server));
    });
  let server: Server | undefined = await listen(0);
  const port = (server.address() as AddressInfo).port;
  const stop = async () => {
    const s = server;
    server = undefined;
    const closed = s ? new Promise<void>((resolve) => s.close(() => resolve())) : Promise.resolve();
    for (const socket of sockets) socket.resetAndDestroy();
    sockets.clear();
    await closed;
  };
  return {
    port,
    cut: stop,
    async restore() {
      server ??= await listen(port);
    },
    close: stop,
  };
}

/** `url` with its host and port replaced by the proxy's. */
export function throughProxy(url: string, proxy: TcpProxy): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(proxy.port);
  return u.toString();
}
