import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { Db } from '../../src/db/db.ts';
import { migrate, readMigrations } from '../../src/db/migrate.ts';
import { openPglite, PGLITE_PARSERS, pgliteDb } from '../../src/db/pglite.ts';
import { openPostgres } from '../../src/db/postgres.ts';

/**
 * Test databases. With TEST_DATABASE_URL (a PostgreSQL server) each test database is a new
 * database on that server, dropped afterwards; without it, an in-memory PGlite. Either way the
 * suite runs the real SQL of the real engine.
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;
export const backendName = TEST_DATABASE_URL ? 'postgres' : 'pglite';

export interface TestDb {
  db: Db;
  /** The PostgreSQL URL of this test database (undefined on PGlite). */
  url: string | undefined;
  /** Closes the connection and drops the database. */
  dispose(): Promise<void>;
}

function databaseUrl(base: string, name: string): string {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A fresh, empty database on the test server (no migrations applied). */
export async function createPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  if (!TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const name = `svc_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return {
    url: databaseUrl(TEST_DATABASE_URL, name),
    async drop() {
      const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * PGlite takes 1-2 s to initialise a cluster (much more on a busy machine) but ~0.3 s to load
 * one from a dump, so each kind of cluster is dumped once into the temp dir, under a key that
 * changes with what it holds, and every test database starts from it.
 */
async function cachedPgliteDump(key: string, prepare: (raw: PGlite) => Promise<void>): Promise<Blob> {
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), 'svc-test-cache');
  const file = join(dir, `pglite-${hash}.tar`);
  if (existsSync(file)) return new Blob([readFileSync(file)]);
  const raw = await PGlite.create({ parsers: PGLITE_PARSERS });
  await prepare(raw);
  const dump = await raw.dumpDataDir('none');
  await raw.close();
  mkdirSync(dir, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, Buffer.from(await dump.arrayBuffer()));
  renameSync(tmp, file);
  return dump;
}

/** The installed PGlite's version: a cluster dumped by another version is not loaded. */
const PGLITE_VERSION: string = JSON.parse(
  readFileSync(new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url), 'utf8'),
).version;

/**
 * A cluster with every migration applied, keyed by the migrations' numbers and content (a
 * migration renumbered with the same content is another cluster: the numbers are recorded in it).
 */
function migratedPgliteDump(): Promise<Blob> {
  const checksums = readMigrations()
    .map((m) => `${m.version}:${m.checksum}`)
    .join(',');
  return cachedPgliteDump(`migrated ${PGLITE_VERSION} ${checksums}`, (raw) =>
    migrate(pgliteDb(raw)).then(() => undefined),
  );
}

/**
 * A data directory `data` under `dir` for a service started as a child process on the embedded
 * database, with every migration applied already (loaded from the cached migrated cluster) and
 * no rows, as a new database has after its first migration: the child skips creating a cluster
 * and migrating it (about 4 s of CPU each on a 2-core machine, against about 0.5 s here).
 */
export async function seededDataDir(dir: string): Promise<string> {
  const dataDir = join(dir, 'data');
  const db = await openPglite(dataDir, { loadDataDir: await migratedPgliteDump() });
  await db.close();
  return dataDir;
}

/** A fresh, empty embedded database (no migrations applied), loaded from a cached empty cluster. */
export async function createEmptyPglite(): Promise<Db> {
  const dump = await cachedPgliteDump(`empty ${PGLITE_VERSION}`, async () => undefined);
  return openPglite('memory://', { loadDataDir: dump });
}

/** A migrated database for one test service. */
export async function createTestDb(): Promise<TestDb> {
  if (TEST_DATABASE_URL) {
    const created = await createPostgresDatabase();
    const db = await openPostgres(created.url, 5, () => undefined);
    await migrate(db);
    return {
      db,
      url: created.url,
      async dispose() {
        await db.close().catch(() => undefined);
        await created.drop();
      },
    };
  }
  const db = await openPglite('memory://', { loadDataDir: await migratedPgliteDump() });
  return { db, url: undefined, dispose: () => db.close().catch(() => undefined) };
}
