import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Db } from '../src/db/db.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { TEST_DATABASE_URL } from './helpers/db.ts';

describe('the PostgreSQL pool', {
  skip: !TEST_DATABASE_URL && 'the pool needs a server (run with TEST_DATABASE_URL)',
}, () => {
  const name = `svc-pool-${randomUUID().slice(0, 8)}`;
  let db: Db;
  let observer: pg.Client;
  const connections = async () => {
    const { rows } = await observer.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
      [name],
    );
    return rows[0]?.n;
  };
  before(async () => {
    const url = new URL(TEST_DATABASE_URL ?? '');
    url.searchParams.set('application_name', name);
    db = await openPostgres(url.toString(), 3, () => undefined);
    observer = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await observer.connect();
  });
  after(async () => {
    await db.close();
    await observer.end();
  });

  test('connections opened for a burst of work stay open after it, ready for the next', async () => {
    await Promise.all([1, 2, 3].map(() => db.query('SELECT pg_sleep(0.2)')));
    assert.equal(await connections(), 3);
    // Longer than the driver's default idle timeout (10 s), after which it closed them.
    await sleep(11_000);
    assert.equal(await connections(), 3);
    await Promise.all([1, 2, 3].map(() => db.query('SELECT pg_sleep(0.05)')));
    assert.equal(await connections(), 3);
  });
});
