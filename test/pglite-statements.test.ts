import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Db } from '../src/db/db.ts';
import { createEmptyPglite } from './helpers/db.ts';

/**
 * The embedded adapter prepares statements through PGlite's protocol API instead of its
 * query(). These are the behaviours callers rely on whichever path a statement takes.
 */
describe('prepared statements on the embedded database', () => {
  let db: Db;

  before(async () => {
    db = await createEmptyPglite();
    await db.exec('CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, tags text[], at timestamptz)');
  });
  after(() => db.close());

  test('a statement run again returns fresh results with typed values, nulls included', async () => {
    const at = new Date('2030-01-02T03:04:05.678Z');
    const insert = 'INSERT INTO items (id, name, tags, at) VALUES ($1, $2, $3, $4) RETURNING id, tags, at';
    assert.deepEqual(await db.query(insert, [1, 'one', ['a', 'b'], at]), [{ id: 1, tags: ['a', 'b'], at }]);
    assert.deepEqual(await db.query(insert, [2, 'two', null, null]), [{ id: 2, tags: null, at: null }]);
    const read = 'SELECT id, name FROM items WHERE id = $1';
    assert.deepEqual(await db.query(read, [1]), [{ id: 1, name: 'one' }]);
    assert.deepEqual(await db.query(read, [2]), [{ id: 2, name: 'two' }]);
    assert.deepEqual(await db.query(read, [3]), []);
  });

  test('a failing statement reports the database error and leaves the connection usable', async () => {
    const insert = 'INSERT INTO items (id, name) VALUES ($1, $2)';
    await db.query(insert, [10, 'ten']);
    await assert.rejects(db.query(insert, [10, 'again']), { code: '23505' });
    await assert.rejects(db.query('SELEC broken', []), { code: '42601' });
    // The same text fails again the same way: a statement that did not parse is not kept.
    await assert.rejects(db.query('SELEC broken', []), { code: '42601' });
    // An error after some rows were sent: the statement fails, none of its rows are returned.
    await assert.rejects(db.query('SELECT 10 / (g - $1::int) AS q FROM generate_series(1, 5) g', [3]), {
      code: '22012',
    });
    assert.deepEqual(await db.query('SELECT name FROM items WHERE id = $1', [10]), [{ name: 'ten' }]);
  });

  test('statements inside a transaction commit or roll back with it', async () => {
    const insert = 'INSERT INTO items (id, name) VALUES ($1, $2)';
    await db.transaction(async (tx) => {
      await tx.query(insert, [20, 'kept']);
    });
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.query(insert, [21, 'undone']);
        await tx.query(insert, [20, 'duplicate']);
      }),
      { code: '23505' },
    );
    const rows = await db.query<{ id: number }>('SELECT id FROM items WHERE id >= $1 ORDER BY id', [20]);
    assert.deepEqual(
      rows.map((r) => r.id),
      [20],
    );
  });

  test('statements sent at once from many requests all complete, in the order they were sent', async () => {
    const finished: number[] = [];
    await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const [row] = await db.query<{ n: number }>('SELECT $1::int AS n', [i]);
        finished.push(row?.n ?? -1);
      }),
    );
    assert.deepEqual(
      finished,
      Array.from({ length: 50 }, (_, i) => i),
    );
  });

  test('statements sent together let the event loop turn while they run, in the order they were sent', async () => {
    // Each statement holds the thread a millisecond or more: 100 of them hold it far longer than
    // the budget after which the loop gets a turn (TURN_BUDGET_MS), so a timer set after
    // sending them fires while they run, not after the last. Sent from a timer's callback, as
    // requests' statements are sent from I/O callbacks: they all run in the check phase that
    // follows, before the loop's next timers phase unless they let it turn.
    await new Promise((resolve) => setTimeout(resolve, 1));
    const finished: number[] = [];
    let finishedWhenTimerFired = -1;
    const timer = new Promise<void>((resolve) =>
      setTimeout(() => {
        finishedWhenTimerFired = finished.length;
        resolve();
      }, 0),
    );
    const total = 100;
    await Promise.all([
      timer,
      ...Array.from({ length: total }, async (_, i) => {
        await db.query('SELECT count(*) FROM generate_series(1, $1::int)', [20_000 + i]);
        finished.push(i);
      }),
    ]);
    assert.ok(
      finishedWhenTimerFired >= 0 && finishedWhenTimerFired < total,
      `the timer fired after ${finishedWhenTimerFired} of ${total} statements`,
    );
    assert.deepEqual(
      finished,
      Array.from({ length: total }, (_, i) => i),
    );
  });

  test('an answer larger than PGlite hands over at once arrives whole, row by row', async () => {
    // 3,000 rows of about 1 KB: several parts of the answer, messages cut between them.
    const rows = await db.query<{ n: number; pad: string }>(
      `SELECT g AS n, repeat(chr(97 + g % 26), 1000) AS pad FROM generate_series(1, $1::int) g`,
      [3000],
    );
    assert.equal(rows.length, 3000);
    for (const [i, row] of rows.entries()) {
      const n = i + 1;
      assert.equal(row.n, n);
      assert.equal(row.pad, String.fromCharCode(97 + (n % 26)).repeat(1000));
    }
  });

  test('a notification sent by a prepared statement or a transaction reaches each listener once', async () => {
    const heard: string[] = [];
    const other: string[] = [];
    const unlisten = await db.listen('svc_probe', (payload) => heard.push(payload));
    const unlistenOther = await db.listen('svc_probe_other', (payload) => other.push(payload));
    await db.query('SELECT pg_notify($1, $2)', ['svc_probe', 'from a statement']);
    await db.transaction(async (tx) => {
      await tx.query('SELECT pg_notify($1, $2)', ['svc_probe', 'from a transaction']);
    });
    await db.exec(`NOTIFY svc_probe, 'from exec'`);
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(heard.sort(), ['from a statement', 'from a transaction', 'from exec']);
    assert.deepEqual(other, [], 'a channel hears only its own');
    await unlisten();
    await db.query('SELECT pg_notify($1, $2)', ['svc_probe', 'after unlisten']);
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(heard.length, 3, 'nothing arrives after unlisten');
    await unlistenOther();
  });
});
