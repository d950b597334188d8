import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Db } from './db.ts';
import { holdTransactionLock, LOCK_KEYS } from './sql/advisory-locks.ts';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

/** Reads `migrations/NNNN-name.sql`, ordered by number. Numbers must be unique. */
export function readMigrations(dir = MIGRATIONS_DIR): Migration[] {
  const seen = new Set<number>();
  return readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .map((file) => {
      const m = /^(\d{4})-([a-z0-9-]+)\.sql$/.exec(file);
      if (!m?.[1] || !m[2]) throw new Error(`migration file name must be NNNN-name.sql: ${file}`);
      const version = Number(m[1]);
      if (seen.has(version)) throw new Error(`two migrations are numbered ${m[1]}`);
      seen.add(version);
      const sql = readFileSync(`${dir}/${file}`, 'utf8');
      return { version, name: m[2], sql, checksum: createHash('sha256').update(sql).digest('hex') };
    })
    .sort((a, b) => a.version - b.version);
}

/**
 * Applies the migrations not yet applied, forward only, in one transaction under an advisory
 * lock, so processes starting at once wait for each other and none applies a file twice.
 * An applied migration whose file has since changed stops startup: history is not rewritten.
 */
export async function migrate(db: Db, migrations = readMigrations()): Promise<number[]> {
  return db.transaction(async (tx) => {
    await holdTransactionLock(tx, LOCK_KEYS.migrations);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const applied = await tx.query<{ version: number; checksum: string; name: string }>(
      'SELECT version, checksum, name FROM schema_migrations',
    );
    const byVersion = new Map(applied.map((a) => [a.version, a]));
    const known = new Set(migrations.map((m) => m.version));
    for (const a of applied) {
      if (!known.has(a.version)) {
        throw new Error(
          `database has migration ${a.version} (${a.name}) that this version does not know; run a newer release`,
        );
      }
    }
    const done: number[] = [];
    for (const m of migrations) {
      const prior = byVersion.get(m.version);
      if (prior) {
        if (prior.checksum !== m.checksum) {
          throw new Error(`migration ${m.version}-${m.name} was changed after it was applied`);
        }
        continue;
      }
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
        m.version,
        m.name,
        m.checksum,
      ]);
      done.push(m.version);
    }
    return done;
  });
}
