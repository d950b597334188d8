import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { Db } from '../src/db/db.ts';
import { MIGRATIONS_DIR, migrate, readMigrations } from '../src/db/migrate.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { createEmptyPglite, createPostgresDatabase, TEST_DATABASE_URL } from './helpers/db.ts';

/** An empty database (no migrations) on the backend under test, plus a way to open a second connection. */
async function emptyDatabase(): Promise<{ db: Db; second(): Promise<Db>; dispose(): Promise<void> }> {
  if (TEST_DATABASE_URL) {
    const created = await createPostgresDatabase();
    const opened: Db[] = [];
    const open = async () => {
      const db = await openPostgres(created.url, 2, () => undefined);
      opened.push(db);
      return db;
    };
    const db = await open();
    return {
      db,
      second: open,
      async dispose() {
        for (const d of opened) await d.close().catch(() => undefined);
        await created.drop();
      },
    };
  }
  const db = await createEmptyPglite();
  return { db, second: async () => db, dispose: () => db.close() };
}

const tables = async (db: Db) =>
  (
    await db.query<{ t: string }>(
      "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    )
  ).map((r) => r.t);

describe('migrations', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test('apply on an empty database, once', async () => {
    const { db, dispose } = await emptyDatabase();
    try {
      const all = readMigrations().map((m) => m.version);
      assert.deepEqual(await migrate(db), all);
      assert.deepEqual(await migrate(db), [], 'nothing left to apply');
      const names = await tables(db);
      for (const t of [
        'organizations',
        'api_keys',
        'rate_limit_counters',
        'schema_migrations',
        'service_meta',
      ]) {
        assert.ok(names.includes(t), t);
      }
    } finally {
      await dispose();
    }
  });

  test('processes migrating at the same moment apply each migration once', async () => {
    const { db, second, dispose } = await emptyDatabase();
    try {
      const other = await second();
      const results = await Promise.all([migrate(db), migrate(other), migrate(db)]);
      const applied = results.flat().sort();
      assert.deepEqual(
        applied,
        readMigrations()
          .map((m) => m.version)
          .sort(),
      );
      const [row] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
      assert.equal(row?.n, readMigrations().length);
    } finally {
      await dispose();
    }
  });

  test('an applied migration whose file changed stops the start', async () => {
    const { db, dispose } = await emptyDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'svc-mig-'));
    dirs.push(dir);
    try {
      cpSync(MIGRATIONS_DIR, dir, { recursive: true });
      await migrate(db, readMigrations(dir));
      const first = readdirSync(dir).sort()[0] ?? '';
      writeFileSync(join(dir, first), '-- edited\nSELECT 1;\n');
      await assert.rejects(migrate(db, readMigrations(dir)), /was changed after it was applied/);
    } finally {
      await dispose();
    }
  });

  test('a database migrated by a newer version is refused by an older one', async () => {
    const { db, dispose } = await emptyDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'svc-mig-'));
    dirs.push(dir);
    try {
      cpSync(MIGRATIONS_DIR, dir, { recursive: true });
      writeFileSync(join(dir, '9999-from-the-future.sql'), 'CREATE TABLE future (id int);\n');
      await migrate(db, readMigrations(dir));
      await assert.rejects(migrate(db), /migration 9999 \(from-the-future\) that this version does not know/);
    } finally {
      await dispose();
    }
  });

  test('a failing migration leaves nothing half-applied', async () => {
    const { db, dispose } = await emptyDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'svc-mig-'));
    dirs.push(dir);
    try {
      cpSync(MIGRATIONS_DIR, dir, { recursive: true });
      writeFileSync(
        join(dir, '9998-broken.sql'),
        'CREATE TABLE half (id int);\nSELECT * FROM no_such_table;\n',
      );
      await assert.rejects(migrate(db, readMigrations(dir)));
      assert.deepEqual(await tables(db), [], 'the whole batch rolled back');
    } finally {
      await dispose();
    }
  });
});
