// What the service keeps at rest, for tests that look for values which must never be there:
// every row of every table as text, and the raw files of either database.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { Queryable } from '../../src/db/db.ts';

/** Every row of every table of the service's schema, as PostgreSQL prints a row. */
export async function allRows(db: Queryable): Promise<string> {
  const tables = await db.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`,
  );
  assert.ok(tables.length >= 10, 'the schema has its tables');
  const parts: string[] = [];
  for (const { name } of tables) {
    const rows = await db.query<{ row: string }>(`SELECT t::text AS row FROM "${name}" t`);
    parts.push(`[${name}]`, ...rows.map((r) => r.row));
  }
  return parts.join('\n');
}

export function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

/** The files, among those given, that hold one of the patterns. */
export function filesHolding(files: readonly string[], patterns: readonly Buffer[]): string[] {
  const hits: string[] = [];
  for (const file of files) {
    const bytes = readFileSync(file);
    if (patterns.some((p) => bytes.includes(p))) hits.push(file);
  }
  return hits;
}

/**
 * The files of a PostgreSQL test database (after a checkpoint) and the server's WAL, or why
 * they cannot be read from here (another machine, another user).
 */
export async function postgresFiles(url: string): Promise<string[] | string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CHECKPOINT');
    const dir = (await client.query<{ data_directory: string }>('SHOW data_directory')).rows[0]
      ?.data_directory;
    const oid = (
      await client.query<{ oid: number }>('SELECT oid FROM pg_database WHERE datname = current_database()')
    ).rows[0]?.oid;
    if (!dir || oid === undefined) return 'the server did not say where its data directory is';
    return [...filesUnder(join(dir, 'base', String(oid))), ...filesUnder(join(dir, 'pg_wal'))];
  } catch (err) {
    return `the PostgreSQL data files cannot be read by this test (${(err as Error).message})`;
  } finally {
    await client.end();
  }
}

/**
 * The raw files of the service's database: the embedded data directory when there is one, else
 * the PostgreSQL database's files and WAL; or why they cannot be read from here.
 */
export function databaseFiles(dataDir: string | undefined, databaseUrl: string): Promise<string[] | string> {
  return dataDir ? Promise.resolve(filesUnder(dataDir)) : postgresFiles(databaseUrl);
}
