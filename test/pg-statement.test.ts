import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import type { Db } from '../src/db/db.ts';
import { PipelineQuery, type ShapeOf } from '../src/db/pg-statement.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { TEST_DATABASE_URL } from './helpers/db.ts';

// The service's statements on PostgreSQL go through its own extension-point query
// (src/db/pg-statement.ts), one statement or a batch's pipeline: the driver's protocol
// connection, the server's real answers.

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

  test('a statement or a batch PostgreSQL refuses gives its connection back to the pool, not closed', async () => {
    const pid = async () => (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))[0]?.pid;
    const before = await pid();
    await assert.rejects(db.query('SELECT 1 / $1::int AS x', [0]), /division by zero/);
    await assert.rejects(db.batch([{ sql: 'SELECT 1 / $1::int AS x', params: [0] }]), /division by zero/);
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

  // A pipeline's statements are prepared on the connection as it goes: one refused leaves those
  // before it prepared and those after it not, and the connection must know which (a statement
  // parsed twice, or bound unparsed, would fail every later pipeline on that connection). The
  // pool replaces a connection after any error, so these run on one client of their own.
  describe('pipelines on one connection', () => {
    let client: pg.Client;
    before(async () => {
      client = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await client.connect();
    });
    after(() => client.end());
    const shapeOf: ShapeOf = (_text, fields) => ({
      parsers: fields.map(() => (v: string) => v),
      make: (values) => Object.fromEntries(fields.map((f, i) => [f.name, values[i]])),
    });
    /** The first row of each statement, as Db.batch gives them. */
    const run = (statements: { sql: string; params: unknown[] }[]) =>
      new Promise<unknown[]>((resolve, reject) => {
        const query = new PipelineQuery(
          statements.map((s) => ({
            text: s.sql,
            name: `probe_${createHash('sha1').update(s.sql).digest('hex')}`,
            values: s.params,
          })),
          shapeOf,
        );
        (
          client.query as unknown as (
            q: PipelineQuery,
            cb: (err: Error | null, rows?: unknown[][]) => void,
          ) => void
        )(query, (err, rows) => (err ? reject(err) : resolve((rows ?? []).map((r) => r[0]))));
      });
    const prepared = async () =>
      (
        await client.query<{ name: string }>(
          "SELECT name FROM pg_prepared_statements WHERE name LIKE 'probe_%'",
        )
      ).rows.length;

    test('after a pipeline fails at its second statement, the next ones on the connection run all three', async () => {
      const tag = randomUUID();
      const first = { sql: `SELECT $1::int + 1 AS x -- ${tag} 1`, params: [1] };
      const failing = (d: number) => ({ sql: `SELECT 10 / $1::int AS y -- ${tag} 2`, params: [d] });
      const third = { sql: `SELECT $1::text AS z -- ${tag} 3`, params: ['z'] };
      const before = await prepared();
      await assert.rejects(run([first, failing(0), third]), /division by zero/);
      assert.equal(await prepared(), before + 2, 'the two statements PostgreSQL got to are prepared');
      assert.deepEqual(await run([first, failing(5), third]), [{ x: '2' }, { y: '2' }, { z: 'z' }]);
      assert.deepEqual(await run([third, first]), [{ z: 'z' }, { x: '2' }]);
      assert.equal(await prepared(), before + 3);
    });

    test('after a pipeline whose second statement does not parse, the statements around it run in the next ones', async () => {
      const tag = randomUUID();
      const first = { sql: `SELECT $1::int + 1 AS x -- ${tag} 1`, params: [1] };
      const third = { sql: `SELECT $1::text AS z -- ${tag} 3`, params: ['z'] };
      const before = await prepared();
      await assert.rejects(
        run([first, { sql: `SELEC broken -- ${tag}`, params: [] }, third]),
        /syntax error/,
      );
      assert.equal(await prepared(), before + 1);
      assert.deepEqual(await run([third, first]), [{ z: 'z' }, { x: '2' }]);
      assert.deepEqual(await run([first, third]), [{ x: '2' }, { z: 'z' }]);
    });

    test('a pipeline with a parameter the driver cannot convert sends nothing, and the connection goes on', async () => {
      await client.query('CREATE TEMP TABLE IF NOT EXISTS pipeline_probe (v int)');
      const unconvertible = {
        toPostgres() {
          throw new Error('cannot be a parameter');
        },
      };
      await assert.rejects(
        run([
          { sql: 'INSERT INTO pipeline_probe (v) VALUES ($1) RETURNING v', params: [1] },
          { sql: 'SELECT $1::text AS x', params: [unconvertible] },
        ]),
        /cannot be a parameter/,
      );
      assert.deepEqual((await client.query('SELECT v FROM pipeline_probe')).rows, []);
      assert.deepEqual(await run([{ sql: 'SELECT $1::text AS x', params: ['fine'] }]), [{ x: 'fine' }]);
    });
  });

  test('a batch is one transaction: a row it locks is held until its last statement is done', async () => {
    await db.exec('CREATE TABLE IF NOT EXISTS pipeline_locks (id int PRIMARY KEY, n int)');
    await db.exec('INSERT INTO pipeline_locks VALUES (1, 0) ON CONFLICT (id) DO UPDATE SET n = 0');
    const other = await openPostgres(TEST_DATABASE_URL ?? '', 1, () => undefined);
    try {
      // The batch locks the row, then sleeps; the other connection's update waits for its commit
      // and sees its write (a statement that committed by itself would let it in at once).
      const batch = db.batch([
        { sql: 'SELECT n FROM pipeline_locks WHERE id = $1 FOR UPDATE', params: [1] },
        { sql: 'SELECT true AS slept FROM pg_sleep($1::float8)', params: [1] },
        { sql: 'UPDATE pipeline_locks SET n = n + 10 WHERE id = $1 RETURNING n', params: [1] },
      ]);
      // Once the batch's backend sleeps, its first statement has locked the row.
      for (;;) {
        const [sleeping] = await other.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()",
        );
        if (sleeping?.n) break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const [updated] = await other.query<{ n: number }>(
        'UPDATE pipeline_locks SET n = n + 1 WHERE id = $1 RETURNING n',
        [1],
      );
      assert.deepEqual(await batch, [{ n: 0 }, { slept: true }, { n: 10 }]);
      assert.equal(updated?.n, 11);
    } finally {
      await other.close();
    }
  });
});
