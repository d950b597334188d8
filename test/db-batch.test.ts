// Several statements in one round trip and one transaction (Db.batch: a pipeline of the extended
// protocol on PostgreSQL, svc_batch of migration 0021 on the embedded database): the worker
// claims its runs and records their usage and ends with it, so it must behave as the same
// statements sent one by one inside a transaction. svc_batch itself is tested on both backends:
// processes of the previous version call it during an upgrade.
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Queryable } from '../src/db/db.ts';
import { parameterText, svcBatch } from '../src/db/pglite-batch.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { backendName, createTestDb, type TestDb } from './helpers/db.ts';

// One database for both groups below (its probe table, the statements they prepare).
describe(`batches (${backendName})`, () => {
  let t: TestDb;
  before(async () => {
    t = await createTestDb();
    await t.db.exec('CREATE TABLE batch_probe (id uuid PRIMARY KEY, n int NOT NULL, note text)');
  });
  after(async () => {
    await t?.dispose();
  });

  describe(`several statements in one round trip (${backendName})`, () => {
    test('the statements run in their order, each seeing what the earlier ones wrote, and each returns its first row', async () => {
      const a = randomUUID();
      const b = randomUUID();
      const rows = await t.db.batch([
        {
          sql: 'INSERT INTO batch_probe (id, n) SELECT unnest($1::uuid[]), 1 RETURNING id',
          params: [[a, b]],
        },
        { sql: 'UPDATE batch_probe SET n = n + $2 WHERE id = $1 RETURNING n', params: [a, 41] },
        { sql: 'SELECT sum(n)::int AS total FROM batch_probe WHERE id = ANY($1::uuid[])', params: [[a, b]] },
        { sql: 'SELECT id FROM batch_probe WHERE n > $1', params: [1000] },
      ]);
      assert.equal(rows.length, 4);
      assert.ok(rows[0] && [a, b].some((id) => id === rows[0]?.id), 'the first of the two rows inserted');
      assert.deepEqual(rows[1], { n: 42 });
      assert.deepEqual(rows[2], { total: 43 });
      assert.equal(rows[3], undefined, 'a statement that returned no row returns nothing');
    });

    test('an error in one statement rolls back the statements before it, and the next batch runs', async () => {
      const id = randomUUID();
      await assert.rejects(
        t.db.batch([
          { sql: 'INSERT INTO batch_probe (id, n) VALUES ($1, 1) RETURNING id', params: [id] },
          { sql: 'SELECT 1 / $1::int AS x', params: [0] },
        ]),
        /division by zero/,
      );
      const [row] = await t.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM batch_probe WHERE id = $1',
        [id],
      );
      assert.equal(row?.n, 0);
      const [again] = await t.db.batch([
        { sql: 'INSERT INTO batch_probe (id, n) VALUES ($1, 1) RETURNING id', params: [id] },
      ]);
      assert.deepEqual(again, { id });
    });

    test('parameters of every kind the service sends arrive as the driver would send them', async () => {
      const awkward = [
        'plain',
        'with "quotes"',
        'back\\slash',
        'comma, brace } and {',
        '',
        null,
        'NULL',
        'é ✓',
      ];
      const at = new Date('2027-03-28T01:30:00.123Z');
      const params = [awkward, at, 12.345, null, true, { k: ['v', 1] }, [1, 2, 3], [randomUUID()]];
      const sql = `SELECT $1::text[] AS texts, $2::timestamptz AS at, $3::numeric AS amount, $4::text AS nothing,
              $5::boolean AS flag, $6::jsonb AS doc, $7::int[] AS ints, $8::uuid[] AS ids`;
      const direct = await t.db.query<Record<string, unknown>>(sql, params);
      const [batched] = await t.db.batch([{ sql, params }]);
      // svc_batch's rows come back as JSON (timestamps as text), a pipeline's as the driver's.
      const row = batched as Record<string, unknown>;
      assert.deepEqual(row.texts, awkward);
      assert.equal(new Date(row.at as string | Date).getTime(), at.getTime());
      assert.equal(Number(row.amount), 12.345);
      assert.equal(row.nothing, null);
      assert.equal(row.flag, true);
      assert.deepEqual(row.doc, { k: ['v', 1] });
      assert.deepEqual(row.ids, params[7]);
      assert.deepEqual(direct[0]?.texts, awkward, 'the same values sent one statement at a time');
      assert.deepEqual(row.ints, direct[0]?.ints);
    });

    test('a text given twice in a batch is run as often as it is given', async () => {
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      const sql = 'INSERT INTO batch_probe (id, n, note) VALUES ($1, $2, $3) RETURNING n';
      const rows = await t.db.batch(ids.map((id, i) => ({ sql, params: [id, i, `note ${i}`] })));
      assert.deepEqual(rows, [{ n: 0 }, { n: 1 }, { n: 2 }]);
    });

    test('the statements are planned once, without sequential scans; the settings end with the batch', async () => {
      const [settings] = await t.db.batch([
        {
          sql: "SELECT current_setting('plan_cache_mode') AS plans, current_setting('enable_seqscan') AS seqscan WHERE $1::int > 0",
          params: [1],
        },
      ]);
      assert.deepEqual(settings, { plans: 'force_generic_plan', seqscan: 'off' });
      // Outside the batch the connection's own settings are untouched.
      const [outside] = await t.db.query<{ seqscan: string; plans: string }>(
        "SELECT current_setting('enable_seqscan') AS seqscan, current_setting('plan_cache_mode') AS plans",
      );
      assert.deepEqual(outside, { seqscan: 'on', plans: 'auto' });
    });

    test('a setting made for its transaction by one statement is seen by the statements after it, and by nothing after the batch', async () => {
      const rows = await t.db.batch([
        { sql: "SELECT set_config('svc.batch_probe', $1, true) AS kept", params: ['picked'] },
        { sql: "SELECT current_setting('svc.batch_probe') AS seen WHERE $1::int > 0", params: [1] },
      ]);
      assert.deepEqual(rows, [{ kept: 'picked' }, { seen: 'picked' }]);
      const [after] = await t.db.query<{ seen: string | null }>(
        "SELECT nullif(current_setting('svc.batch_probe', true), '') AS seen",
      );
      assert.equal(after?.seen ?? null, null);
    });
  });

  describe(`svc_batch, the embedded database's batch (${backendName})`, () => {
    const once = (db: Queryable) => svcBatch((text, params) => db.query(text, params));

    test('a statement that cannot return rows is refused with the reason, and nothing of the batch is written', async () => {
      const id = randomUUID();
      await assert.rejects(
        once(t.db)([
          { sql: 'INSERT INTO batch_probe (id, n) VALUES ($1, 1) RETURNING id', params: [id] },
          { sql: 'UPDATE batch_probe SET n = 2 WHERE id = $1', params: [id] },
        ]),
        /cannot return data/,
      );
      const [row] = await t.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM batch_probe WHERE id = $1',
        [id],
      );
      assert.equal(row?.n, 0);
    });

    test('a statement first prepared in a batch that was rolled back, or on a connection whose settings were reset, runs again in the next batch', async () => {
      // A new text: prepared by the failing batch below, on the transaction's one connection. The
      // statement outlives the rollback (PREPARE is not transactional), the mark that it was
      // prepared does not (a setting): the next batch must find it, not prepare it again.
      const sql = `SELECT 10 / $1::int AS x -- ${randomUUID()}`;
      const results = await t.db.transaction(async (tx) => {
        await tx.exec('SAVEPOINT before_batch');
        await assert.rejects(once(tx)([{ sql, params: [0] }]), /division by zero/);
        await tx.exec('ROLLBACK TO SAVEPOINT before_batch');
        const again = await once(tx)([{ sql, params: [2] }]);
        await tx.exec('RESET ALL');
        const afterReset = await once(tx)([{ sql, params: [5] }]);
        return [again, afterReset];
      });
      assert.deepEqual(results, [[{ x: 5 }], [{ x: 2 }]]);
    });

    test('a text is sent until a batch carrying it commits, then named only; emptied of its kept texts, the database gets them again', async () => {
      const sql = `SELECT $1::int * 3 AS x -- ${randomUUID()}`;
      const name = `svc_batch_${createHash('md5').update(sql).digest('hex')}`;
      const kept = async () =>
        (
          await t.db.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM svc_statement_texts WHERE text = $1 AND name = $2',
            [sql, name],
          )
        )[0]?.n;
      // One connection (a pool of one on PostgreSQL), watched: whether each batch carried its texts.
      const one = t.url ? await openPostgres(t.url, 1, () => undefined) : t.db;
      const carried: boolean[] = [];
      const watching = (db: Queryable) =>
        svcBatch((text, params) => {
          if (text.includes('svc_batch')) carried.push('texts' in JSON.parse(String(params?.[0])));
          return db.query(text, params);
        });
      const batch = watching(one);
      // The connection as one that has not prepared the statement: deallocated and unmarked.
      const forget = async () => {
        await one.exec(`DEALLOCATE ${name}`);
        await one.query("SELECT set_config('svc_prepared.' || $1, '', false) AS unmarked", [name]);
      };
      try {
        assert.equal(await kept(), 0);
        assert.deepEqual(await batch([{ sql, params: [2] }]), [{ x: 6 }]);
        assert.equal(await kept(), 1, 'kept once its batch committed');
        // Named only from now on: a connection that has not prepared it reads the kept text.
        await forget();
        assert.deepEqual(await batch([{ sql, params: [3] }]), [{ x: 9 }]);
        assert.deepEqual(carried, [true, false]);
        // Kept texts removed by hand: the name alone is refused, and the batch goes again with its text.
        await t.db.exec('DELETE FROM svc_statement_texts');
        await forget();
        assert.deepEqual(await batch([{ sql, params: [4] }]), [{ x: 12 }]);
        assert.deepEqual(carried, [true, false, false, true]);
        assert.equal(await kept(), 1, 'kept again');
        // Another database knows nothing of this one's kept texts: its first batch carries them.
        const elsewhere = await createTestDb();
        try {
          assert.deepEqual(await watching(elsewhere.db)([{ sql, params: [5] }]), [{ x: 15 }]);
          assert.deepEqual(carried, [true, false, false, true, true]);
        } finally {
          await elsewhere.dispose();
        }
      } finally {
        if (one !== t.db) await one.close();
      }
    });

    test("a batch in the previous version's form, its texts without names, still runs (a process of that version during an upgrade)", async () => {
      const sql = `SELECT $1::int + 1 AS x -- ${randomUUID()}`;
      const rows = await t.db.query<{ item: unknown }>('SELECT item FROM svc_batch($1::jsonb) AS item', [
        JSON.stringify({ texts: [sql], statements: [[0, ['41']]] }),
      ]);
      assert.deepEqual(
        rows.map((r) => r.item),
        [[0, { x: 42 }]],
      );
    });

    test('a batch that names a statement neither prepared nor kept fails with SQLSTATE SVC01', async () => {
      await assert.rejects(
        t.db.query(
          'SELECT item FROM svc_batch(\'{"names": ["svc_batch_nothing"], "statements": []}\'::jsonb) AS item',
        ),
        (err: { code?: string }) => err.code === 'SVC01',
      );
    });

    test('parameterText writes dates in ISO form, arrays as array literals with quoted elements, bytes in hex', () => {
      assert.equal(parameterText(['a', null, 'b"c']), '{"a",NULL,"b\\"c"}');
      assert.equal(parameterText(new Date('2027-01-01T00:00:00Z')), '2027-01-01T00:00:00.000Z');
      assert.equal(parameterText(undefined), null);
      assert.equal(parameterText(Buffer.from([0xde, 0xad])), '\\xdead');
    });
  });
});
