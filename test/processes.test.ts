import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createPostgresDatabase, seededDataDir, TEST_DATABASE_URL } from './helpers/db.ts';
import { runFailingStart, startServerProcess } from './helpers/process.ts';
import { ADMIN_TOKEN } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The real entry point in child processes, on the backend under test: a data directory on
 * disk for PGlite, a fresh database for PostgreSQL.
 */
describe('the service as a process', () => {
  const cleanups: (() => Promise<void>)[] = [];
  after(() => Promise.all(cleanups.map((c) => c())));

  /** An empty database of its own for one test, dropped after the suite. */
  async function freshEnv(): Promise<Record<string, string>> {
    if (TEST_DATABASE_URL) {
      const db = await createPostgresDatabase();
      cleanups.push(db.drop);
      return {
        DATABASE_URL: db.url,
        SVC_SECRET_KEY: randomBytes(32).toString('base64'),
        SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      };
    }
    const dir = mkdtempSync(join(tmpdir(), 'svc-proc-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    return { SVC_DATA_DIR: await seededDataDir(dir), SVC_ADMIN_TOKEN: ADMIN_TOKEN };
  }

  test('the first start on an empty database prints a demo organization and a key that works, and a restart keeps the data and creates no second one', async () => {
    const env = await freshEnv();
    let demo: { organizationId: string; apiKey: string };
    const server = await startServerProcess(env);
    try {
      const out = await server.waitForStdout(/API key: +sats_\w+\n/);
      const orgId = /organizationId: ([0-9a-f-]{36})/.exec(out)?.[1];
      const key = /API key: +(sats_\w+)/.exec(out)?.[1];
      assert.ok(orgId && key, out);
      demo = { organizationId: orgId, apiKey: key };
      const res = await fetch(`${server.url}/api/svc/billing/status?organizationId=${orgId}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(res.status, 200);
      // Logs are JSON lines; the key appears only in the banner, never in a log line.
      const logLines = out.split('\n').filter((l) => l.startsWith('{'));
      assert.ok(logLines.length > 0);
      for (const line of logLines) {
        JSON.parse(line);
        assert.ok(!line.includes(key));
      }
    } finally {
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0);
    }

    const restarted = await startServerProcess(env);
    try {
      assert.ok(!restarted.stdout().includes('Created a demo organization'));
      const res = await fetch(
        `${restarted.url}/api/svc/billing/status?organizationId=${demo.organizationId}`,
        { headers: { authorization: `Bearer ${demo.apiKey}` } },
      );
      assert.equal(res.status, 200);
      const orgs = await fetch(`${restarted.url}/api/admin/organizations`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      assert.equal(((await orgs.json()) as unknown[]).length, 1);
    } finally {
      restarted.child.kill('SIGTERM');
      assert.equal(await restarted.exited, 0);
    }
  });

  test('a scheduler and worker process loads neither TypeBox nor the API, and answers its health routes and the API paths in the envelope', async () => {
    const env = await freshEnv();
    const dir = mkdtempSync(join(tmpdir(), 'svc-modules-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const log = join(dir, 'modules.txt');
    // Every module the process resolves, one URL a line (Node's synchronous module hooks).
    const hook = `import { registerHooks } from 'node:module'; import { appendFileSync } from 'node:fs';
      registerHooks({ resolve(s, c, next) { const r = next(s, c); appendFileSync(${JSON.stringify(log)}, r.url + '\\n'); return r; } });`;
    const server = await startServerProcess({ ...env, SVC_ROLE: 'scheduler,worker' }, 30_000, [
      `--import=data:text/javascript,${encodeURIComponent(hook)}`,
    ]);
    try {
      assert.deepEqual(await (await fetch(`${server.url}/healthz`)).json(), { status: 'ok' });
      assert.deepEqual(await (await fetch(`${server.url}/readyz`)).json(), { status: 'ready' });
      const metrics = await fetch(`${server.url}/metrics`);
      assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain/);
      assert.match(await metrics.text(), /^# HELP /m);
      const api = await fetch(`${server.url}/api/svc/tasks`);
      assert.equal(api.status, 401);
      assert.equal(((await api.json()) as { error: { code: string } }).error.code, 'unauthorized');
    } finally {
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0);
    }
    const modules = readFileSync(log, 'utf8').split('\n');
    // The hook saw the roles' own code: an empty log would prove nothing.
    assert.ok(modules.some((url) => url.endsWith('/src/worker/worker.ts')));
    assert.ok(modules.some((url) => url.endsWith('/src/scheduler/claimer.ts')));
    assert.deepEqual(
      modules.filter((url) => /\/node_modules\/typebox\/|\/src\/http\/api-surface\.ts$/.test(url)),
      [],
    );
  });

  test('SIGTERM lets an in-flight request finish, then exits 0', async () => {
    const server = await startServerProcess(await freshEnv());
    const body = JSON.stringify({ name: 'Drained Ltd' });
    const half = Math.floor(body.length / 2);
    const { port } = new URL(server.url);
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/admin/organizations',
          headers: {
            authorization: `Bearer ${ADMIN_TOKEN}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          let text = '';
          res.on('data', (d) => {
            text += d;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, half));
      // The request is in flight (half its body sent) when the signal arrives. A probe answered
      // after the half was sent shows that the server has read its head: a process busy just
      // after its start (the embedded database's work blocks its event loop) may read it later
      // than any fixed delay, and would then refuse it as arriving during the shutdown.
      setTimeout(async () => {
        try {
          const probe = await fetch(`${server.url}/healthz`);
          await probe.arrayBuffer();
        } catch (err) {
          reject(err);
          return;
        }
        server.child.kill('SIGTERM');
        setTimeout(() => req.end(body.slice(half)), 300);
      }, 200);
    });
    const res = await response;
    assert.equal(res.status, 201, res.body);
    assert.equal(await server.exited, 0);
  });

  test('a wrong SVC_SECRET_KEY fails startup with one clear line', async () => {
    // The database records its key's check value at its first start. The SIGTERM comes as soon
    // as the service listens, before its start has finished: it still shuts down cleanly (exit 0).
    const env = await freshEnv();
    const first = await startServerProcess(env);
    first.child.kill('SIGTERM');
    assert.equal(await first.exited, 0);
    const { code, stderr } = await runFailingStart({
      ...env,
      SVC_SECRET_KEY: randomBytes(32).toString('base64'),
    });
    assert.equal(code, 1);
    const lines = stderr.trim().split('\n');
    assert.equal(lines.length, 1, stderr);
    assert.match(lines[0] ?? '', /SVC_SECRET_KEY is not the key this database was created with/);
  });

  test('a bad configuration value fails startup with one line naming the variable', async () => {
    const { code, stderr } = await runFailingStart({ ...(await freshEnv()), PORT: 'eighty' });
    assert.equal(code, 1);
    assert.equal(stderr.trim().split('\n').length, 1, stderr);
    assert.match(stderr, /PORT must be a whole number/);
  });

  if (TEST_DATABASE_URL) {
    test('two processes on one PostgreSQL share one rate-limit budget and both refuse a revoked key', async () => {
      // Stay inside one one-minute window: start at the top of a minute if less than 20 s remain.
      const intoMinute = (Date.now() / 1000) % 60;
      if (intoMinute > 40) await new Promise((r) => setTimeout(r, (60 - intoMinute) * 1000 + 100));
      const env = await freshEnv();
      const a = await startServerProcess(env);
      const b = await startServerProcess(env);
      try {
        const created = await fetch(`${a.url}/api/admin/organizations`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'Shared' }),
        });
        const org = (await created.json()) as { organizationId: string; apiKey: string };
        const path = `/api/svc/billing/status?organizationId=${org.organizationId}`;
        const get = (base: string, key = org.apiKey) =>
          fetch(base + path, { headers: { authorization: `Bearer ${key}` } });
        // Requests alternate between the processes until both refuse: the free plan's 60 a
        // minute are served exactly once in all, whichever process counted them.
        const statuses: number[] = [];
        for (let i = 0; i < 90; i++) {
          const res = await get(i % 2 ? a.url : b.url);
          statuses.push(res.status);
          assert.ok(Number(res.headers.get('x-ratelimit-remaining')) <= 60);
        }
        assert.equal(statuses.filter((s) => s === 200).length, 60);
        assert.deepEqual(statuses.slice(-4), [429, 429, 429, 429]);
        assert.ok(statuses.every((s) => s === 200 || s === 429));

        // A key revoked through one process is refused by the other, which had it cached.
        const key = await fetch(`${a.url}/api/admin/organizations/${org.organizationId}/keys`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'rotating' }),
        });
        const { id, apiKey } = (await key.json()) as { id: string; apiKey: string };
        assert.notEqual((await get(b.url, apiKey)).status, 401);
        const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
        assert.equal(
          (await fetch(`${a.url}/api/admin/keys/${id}`, { method: 'DELETE', headers: admin })).status,
          204,
        );
        assert.equal((await get(a.url, apiKey)).status, 401);
        // The other process hears of it by NOTIFY, within moments.
        await waitFor(
          'the other process to refuse the revoked key',
          async () => ((await get(b.url, apiKey)).status === 401 ? true : undefined),
          { timeoutMs: 5_000 },
        );
      } finally {
        a.child.kill('SIGTERM');
        b.child.kill('SIGTERM');
        assert.equal(await a.exited, 0);
        assert.equal(await b.exited, 0);
      }
    });
  } else {
    test('a second process cannot open the embedded data directory in use', async () => {
      const env = await freshEnv();
      const a = await startServerProcess(env);
      try {
        const { code, stderr } = await runFailingStart(env);
        assert.equal(code, 1);
        assert.match(stderr, /is in use by process \d+/);
      } finally {
        a.child.kill('SIGTERM');
        assert.equal(await a.exited, 0);
      }
    });
  }
});
