import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Db } from '../src/db/db.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { TEST_DATABASE_URL } from './helpers/db.ts';

// The service's statements on PostgreSQL go through its own extension-point query
// (src/db/pg-statement.ts): the driver's protocol connection, the server's real answers.

describe('statements on PostgreSQL', {
  skip: !TEST_DATABASE_URL && 'the driver for PostgreSQL needs a server (run with TEST_DATABASE_URL)',
}, () => {
  let db: Db;
  const lost: Error[] = [];
  before(async () => {
    // One connection: every statement below runs on the connection the ones before used.
    db = await openPostgres(TEST_DATABASE_URL ?? '', 1, (err) => lost.push(err));
  });
  after(() => db.close());

  test('rows come as objects with their columns typed, nulls as null', async () => {
    const [row] = await db.query<Record<string, unknown>>(
      `SELECT $1::int8 AS n, $2::timestamptz AS at, ARRAY['monday','thursday']::text[] AS days,
              NULL::text AS none, 'x"y'::text AS quoted, '{"a":[1]}'::jsonb AS doc`,
      [42, new Date('2030-01-02T03:04:05.678Z')],
    );
    assert.deepEqual(row, {
      n: 42,
      at: new Date('2030-01-02T03:04:05.678Z'),
      days: ['monday', 'thursday'],
      none: null,
      quoted: 'x"y',
      doc: { a: [1] },
    });
  });

  test('a statement run again on its connection gets the same rows, described or not', async () => {
    const sql = 'SELECT g AS i, g::text AS label FROM generate_series(1, $1::int) AS g';
    for (const n of [0, 3, 1, 5]) {
      const rows = await db.query<{ i: number; label: string }>(sql, [n]);
      assert.deepEqual(
        rows,
        Array.from({ length: n }, (_, k) => ({ i: k + 1, label: String(k + 1) })),
      );
    }
  });

  test('a statement PostgreSQL refuses fails with its error, and the connection goes on', async () => {
    await assert.rejects(db.query('SELECT 1 / $1::int AS x', [0]), /division by zero/);
    await assert.rejects(db.query('SELEC nothing'), /syntax error/);
    await assert.rejects(db.query('SELECT $1::int AS x', ['not a number']), /invalid input syntax/);
    const [row] = await db.query<{ x: number }>('SELECT 1 / $1::int AS x', [1]);
    assert.equal(row?.x, 1);
    assert.deepEqual(lost, []);
  });

  test('a statement PostgreSQL refuses gives its connection back to the pool, not closed', async () => {
    const pid = async () => (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))[0]?.pid;
    const before = await pid();
    await assert.rejects(db.query('SELECT 1 / $1::int AS x', [0]), /division by zero/);
    // Refused at its preparation: the driver forgets the name, so the next use prepares it again.
    await assert.rejects(db.query('SELECT nothing_here AS x'), /does not exist/);
    await assert.rejects(db.query('SELECT $1::int AS x', ['not a number']), /invalid input syntax/);
    assert.equal(await pid(), before, 'the same backend serves the next statement');
    const [row] = await db.query<{ x: number }>('SELECT $1::int AS x', ['7']);
    assert.equal(row?.x, 7, 'a statement refused for its values runs with others on that connection');
  });

  test('a parameter the driver cannot convert fails the statement alone', async () => {
    const unconvertible = {
      toPostgres() {
        throw new Error('cannot be a parameter');
      },
    };
    await assert.rejects(db.query('SELECT $1::text AS x', [unconvertible]), /cannot be a parameter/);
    const [row] = await db.query<{ x: string }>('SELECT $1::text AS x', ['still here']);
    assert.equal(row?.x, 'still here');
  });

  test('statements in a transaction see its writes and a failure rolls it back', async () => {
    await db.exec('CREATE TEMP TABLE IF NOT EXISTS statement_probe (v int)');
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO statement_probe (v) VALUES ($1)', [7]);
        const seen = await tx.query<{ v: number }>('SELECT v FROM statement_probe');
        assert.deepEqual(seen, [{ v: 7 }]);
        await tx.query('SELECT 1 / $1::int AS x', [0]);
      }),
      /division by zero/,
    );
    assert.deepEqual(await db.query('SELECT v FROM statement_probe'), []);
  });
});
