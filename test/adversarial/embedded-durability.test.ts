// Adversarial: the embedded database keeps what it acknowledged. A stale data-directory lock
// whose pid another process now has is taken over (a SIGKILL never leaves a directory that
// refuses to open) while a running service still holds its directory; a first start that fails
// once the database exists (port in use) still leaves the next start to show a working demo key;
// on disk, each commit waits for the disk (and the generated secret key is flushed before the
// database depends on it), and what was acknowledged before a SIGKILL is there after reopening.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs, { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../../src/config.ts';
import { processStartTime } from '../../src/db/data-dir-lock.ts';
import { openPglite } from '../../src/db/pglite.ts';
import { resolveSecretKey } from '../../src/domain/secret-key.ts';
import { createPostgresDatabase, TEST_DATABASE_URL } from '../helpers/db.ts';
import { runFailingStart, startServerProcess } from '../helpers/process.ts';

const EMBEDDED_ONLY =
  Boolean(TEST_DATABASE_URL) &&
  'about the embedded database (PGlite) only: with TEST_DATABASE_URL the service does not use it';

const scratch = mkdtempSync(join(tmpdir(), 'svc-adv-durable-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
let dirCount = 0;
const freshDir = () => join(scratch, `data-${++dirCount}`);

function spawnSleeper(): ChildProcess {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  assert.ok(child.pid);
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

describe('the data-directory lock', { skip: EMBEDDED_ONLY }, () => {
  test('a lock left by a killed process, whose pid another live process got since, is taken over', async () => {
    const sleeper = spawnSleeper();
    try {
      const dir = freshDir();
      // The lock as a killed service of an earlier version left it (the pid alone), written an
      // hour before the pid's current process started.
      fs.mkdirSync(dir, { recursive: true });
      const lockPath = join(dir, 'svc.lock');
      writeFileSync(lockPath, `${sleeper.pid}\n`);
      const anHourAgo = new Date(Date.now() - 3_600_000);
      utimesSync(lockPath, anHourAgo, anHourAgo);
      const db = await openPglite(dir);
      try {
        assert.equal(readFileSync(lockPath, 'utf8').split(' ')[0], String(process.pid));
      } finally {
        await db.close();
      }
    } finally {
      await stopChild(sleeper);
    }
  });

  test("a lock naming a live pid with another process's start time is taken over", async () => {
    const sleeper = spawnSleeper();
    try {
      const dir = freshDir();
      fs.mkdirSync(dir, { recursive: true });
      const started = processStartTime(sleeper.pid ?? 0);
      assert.ok(started, '/proc gives the start time');
      const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
      // The killed owner started before the process that has its pid now.
      writeFileSync(join(dir, 'svc.lock'), `${sleeper.pid} ${Number(started) - 1} ${bootId}`);
      const db = await openPglite(dir);
      await db.close();
    } finally {
      await stopChild(sleeper);
    }
  });

  test('a running service keeps its directory; once it is killed, the directory opens', async () => {
    const dir = freshDir();
    const server = await startServerProcess({ SVC_DATA_DIR: dir, SVC_CREATE_DEMO_ORG: 'false' });
    try {
      const lock = readFileSync(join(dir, 'svc.lock'), 'utf8').split(' ');
      assert.deepEqual(lock.slice(0, 2), [String(server.child.pid), processStartTime(server.child.pid ?? 0)]);
      await assert.rejects(openPglite(dir), new RegExp(`is in use by process ${server.child.pid}`));
      // Even a lock of the old form (the pid alone), written while the service runs.
      writeFileSync(join(dir, 'svc.lock'), String(server.child.pid));
      await assert.rejects(openPglite(dir), /is in use by process/);
    } finally {
      await stopChild(server.child);
    }
    const db = await openPglite(dir);
    await db.close();
  });
});

describe('the demo organization on the first start', () => {
  let env: Record<string, string>;
  let cleanup: () => Promise<void>;
  let blocker: Server;
  let takenPort: number;

  before(async () => {
    if (TEST_DATABASE_URL) {
      const db = await createPostgresDatabase();
      env = { DATABASE_URL: db.url, SVC_SECRET_KEY: randomBytes(32).toString('base64') };
      cleanup = db.drop;
    } else {
      env = { SVC_DATA_DIR: freshDir() };
      cleanup = async () => undefined;
    }
    blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    takenPort = (blocker.address() as { port: number }).port;
  });
  after(async () => {
    await new Promise((resolve) => blocker.close(resolve));
    await cleanup();
  });

  test('a first start that fails on a taken port leaves the next start to show a demo key that works', async () => {
    const failed = await runFailingStart({ ...env, PORT: String(takenPort) });
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /svc: cannot start: .*EADDRINUSE|address already in use/);

    const server = await startServerProcess(env);
    try {
      const out = await server.waitForStdout(/API key: +sats_\w+\n/);
      const orgId = /organizationId: ([0-9a-f-]{36})/.exec(out)?.[1];
      const key = /API key: +(sats_\w+)/.exec(out)?.[1];
      assert.ok(orgId && key, out);
      const res = await fetch(`${server.url}/api/svc/billing/status?organizationId=${orgId}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(res.status, 200);
    } finally {
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0);
    }
  });
});

describe('durable commits in the embedded database', { skip: EMBEDDED_ONLY }, () => {
  test('by default, on disk, the embedded database runs with fsync on and a synchronous WAL', async () => {
    assert.equal(loadConfig({}).embeddedFsync, true);
    assert.equal(loadConfig({ SVC_EMBEDDED_FSYNC: 'false' }).embeddedFsync, false);
    const db = await openPglite(freshDir());
    try {
      assert.deepEqual(await db.query('SHOW fsync'), [{ fsync: 'on' }]);
      assert.deepEqual(await db.query('SHOW wal_sync_method'), [{ wal_sync_method: 'open_datasync' }]);
    } finally {
      await db.close();
    }
  });

  test('commits reach the disk: the WAL is opened with O_SYNC and a checkpoint fsyncs data files', async () => {
    const dir = freshDir();
    const walOpens: number[] = [];
    let fsyncs = 0;
    const { openSync, fsyncSync } = fs;
    // Node's own fs functions, counted where PGlite's filesystem calls them.
    fs.openSync = ((path: fs.PathLike, flags: fs.OpenMode, mode?: fs.Mode) => {
      if (String(path).includes('pg_wal/0') && typeof flags === 'number') walOpens.push(flags);
      return openSync(path, flags, mode);
    }) as typeof fs.openSync;
    fs.fsyncSync = (fd: number) => {
      fsyncs++;
      fsyncSync(fd);
    };
    syncBuiltinESMExports();
    try {
      const db = await openPglite(dir);
      try {
        await db.exec('CREATE TABLE acked (n int)');
        fsyncs = 0;
        await db.query('INSERT INTO acked VALUES (1)');
        await db.exec('CHECKPOINT');
      } finally {
        await db.close();
      }
    } finally {
      fs.openSync = openSync;
      fs.fsyncSync = fsyncSync;
      syncBuiltinESMExports();
    }
    assert.ok(
      walOpens.some((flags) => (flags & fs.constants.O_SYNC) === fs.constants.O_SYNC),
      `a WAL segment opened with O_SYNC (flags seen: ${walOpens.join(', ')})`,
    );
    assert.ok(fsyncs > 0, 'the checkpoint fsynced files');
  });

  test('a generated secret key is on disk, with its directory entry, before the database depends on it', () => {
    const dir = freshDir();
    const opened = new Map<number, string>();
    const synced: string[] = [];
    const { openSync, fsyncSync } = fs;
    fs.openSync = ((path: fs.PathLike, flags: fs.OpenMode, mode?: fs.Mode) => {
      const fd = openSync(path, flags, mode);
      opened.set(fd, String(path));
      return fd;
    }) as typeof fs.openSync;
    fs.fsyncSync = (fd: number) => {
      synced.push(opened.get(fd) ?? `fd ${fd}`);
      fsyncSync(fd);
    };
    syncBuiltinESMExports();
    try {
      resolveSecretKey({ secretKey: undefined, dataDir: dir });
    } finally {
      fs.openSync = openSync;
      fs.fsyncSync = fsyncSync;
      syncBuiltinESMExports();
    }
    assert.ok(synced.includes(join(dir, 'secret.key')), `fsynced: ${synced.join(', ')}`);
    assert.ok(synced.includes(dir), `fsynced: ${synced.join(', ')}`);
  });

  const url = (path: string) => JSON.stringify(pathToFileURL(join(import.meta.dirname, path)).href);
  /**
   * Commits one row at a time and says so after each commit; with a disk directory, under the
   * power-cut model (power-cut-disk.ts), with a checkpoint every 100 rows.
   */
  const WRITER = `
    const [dir, mode, disk] = process.argv.slice(2);
    const model = disk ? (await import(${url('./power-cut-disk.ts')})).installPowerCutDisk(dir, disk) : undefined;
    const { openPglite } = await import(${url('../../src/db/pglite.ts')});
    const db = await openPglite(dir, { durable: mode === 'durable' });
    model?.start();
    await db.exec('CREATE TABLE acked (n int)');
    for (let n = 1; ; n++) {
      await db.query('INSERT INTO acked VALUES ($1)', [n]);
      if (disk && n % 100 === 0) await db.exec('CHECKPOINT');
      process.stdout.write(\`acknowledged \${n}\\n\`);
    }
  `;

  /** Runs the writer until it has acknowledged `upTo` commits, then SIGKILLs it; returns the last. */
  async function writeThenKill(dir: string, mode: 'durable' | 'off', upTo: number, disk?: string) {
    const script = join(scratch, `writer-${++dirCount}.ts`);
    writeFileSync(script, WRITER);
    const child = spawn(process.execPath, [script, dir, mode, ...(disk ? [disk] : [])], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    const acknowledged = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`no acknowledged writes:\n${out}`));
      }, 60_000);
      child.stdout?.on('data', (d) => {
        out += d;
        const last = [...out.matchAll(/acknowledged (\d+)\n/g)].map((m) => Number(m[1])).at(-1) ?? 0;
        if (last >= upTo) {
          // Killed in the middle of its stream of commits, without any chance to clean up.
          child.kill('SIGKILL');
          clearTimeout(timer);
          resolve(last);
        }
      });
    });
    await new Promise((resolve) => child.once('exit', resolve));
    return acknowledged;
  }

  async function acknowledgedRowsIn(dir: string, acknowledged: number): Promise<number> {
    const db = await openPglite(dir);
    try {
      const [row] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM acked WHERE n <= $1', [
        acknowledged,
      ]);
      return row?.n ?? 0;
    } finally {
      await db.close();
    }
  }

  for (const mode of ['durable', 'off'] as const) {
    test(`writes acknowledged before a SIGKILL are there after reopening (fsync ${mode === 'durable' ? 'on' : 'off'})`, async () => {
      const dir = freshDir();
      const acknowledged = await writeThenKill(dir, mode, 200);
      assert.equal(await acknowledgedRowsIn(dir, acknowledged), acknowledged);
    });
  }

  test('after a modelled power cut, only what was flushed is left: every acknowledged write with fsync on', async () => {
    const dir = freshDir();
    const disk = `${dir}-disk`;
    const acknowledged = await writeThenKill(dir, 'durable', 350, disk);
    assert.equal(await acknowledgedRowsIn(disk, acknowledged), acknowledged);
  });

  test('the power-cut model tells: with fsync off, acknowledged writes are lost', async () => {
    const dir = freshDir();
    const disk = `${dir}-disk`;
    const acknowledged = await writeThenKill(dir, 'off', 350, disk);
    // Nothing reached the "disk" after the start: not even the table.
    await assert.rejects(acknowledgedRowsIn(disk, acknowledged), /relation "acked" does not exist/);
  });
});
