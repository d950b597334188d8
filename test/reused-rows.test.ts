import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { REUSE_ROWS } from '../src/db/db.ts';
import { MAX_REUSED_ROWS, ReusedRows } from '../src/db/reused-rows.ts';
import { deepFreeze, memoOnFrozen } from '../src/lib/frozen.ts';
import { backendName, createTestDb, type TestDb } from './helpers/db.ts';

// Reads marked REUSE_ROWS (db.ts): on both backends an unchanged row read again is one frozen object,
// so that a task polled unchanged is not decoded, viewed, written and tagged again
// (lib/frozen.ts).

describe('values that cannot change and what is kept with them', () => {
  test('deepFreeze freezes every object and array reachable, and leaves typed arrays alone', () => {
    const value = deepFreeze({ a: [{ b: 1 }], c: { d: ['e'] }, bytes: Buffer.from('x') });
    assert.ok(Object.isFrozen(value) && Object.isFrozen(value.a) && Object.isFrozen(value.a[0]));
    assert.ok(Object.isFrozen(value.c.d));
    assert.throws(() => {
      (value.a as unknown as unknown[]).push(2);
    }, TypeError);
    assert.equal(Object.isFrozen(value.bytes), false);
  });

  test('a result is computed once per frozen argument, and every time for one that may change', () => {
    let calls = 0;
    const view = memoOnFrozen((row: { n: number }) => {
      calls++;
      return { doubled: row.n * 2 };
    }, true);
    const frozen = Object.freeze({ n: 2 });
    const first = view(frozen);
    assert.equal(view(frozen), first, 'the same object for the same frozen argument');
    assert.ok(Object.isFrozen(first), 'a kept result is frozen: every caller shares it');
    assert.equal(calls, 1);
    const open = { n: 3 };
    assert.deepEqual(view(open), { doubled: 6 });
    open.n = 4;
    assert.deepEqual(view(open), { doubled: 8 }, 'an argument that may change is computed again');
    assert.equal(calls, 3);
  });

  test('a row is kept, frozen, the second time its text is seen; then it is the answer until its text changes', () => {
    const rows = new ReusedRows();
    const raw = ['id-1', 'a', null];
    const first = rows.keep(raw, { id: 'id-1', name: 'a', note: null });
    assert.equal(Object.isFrozen(first), false, "a row seen once is the caller's own");
    assert.equal(rows.known(raw), undefined);
    const second = rows.keep([...raw], { id: 'id-1', name: 'a', note: null });
    assert.ok(Object.isFrozen(second), 'seen twice: frozen and kept');
    assert.equal(rows.known([...raw]), second);
    assert.equal(rows.known(['id-1', 'b', null]), undefined, 'another value in any column is another row');
    assert.equal(rows.known(['id-1', 'a', 'x']), undefined, 'null and a value differ');
    assert.equal(rows.known(['id-1', 'a']), undefined, 'another number of columns differs');
    const changed = rows.keep(['id-1', 'b', null], { id: 'id-1', name: 'b', note: null });
    assert.equal(Object.isFrozen(changed), false);
    assert.equal(rows.known(raw), undefined, 'a changed row replaces the one kept');
    assert.equal(rows.keep([null, 'a'], { note: 'no key' }) !== undefined, true);
    assert.equal(rows.known([null, 'a']), undefined, 'a row without a key is never kept');
  });

  test('at most MAX_REUSED_ROWS rows are remembered, the oldest dropped first', () => {
    const rows = new ReusedRows();
    rows.keep(['id-1', 'a'], { n: 1 });
    const kept = rows.keep(['id-1', 'a'], { n: 1 });
    for (let i = 0; i < MAX_REUSED_ROWS + 10; i++) rows.keep([`other-${i}`, 'a'], { i });
    assert.equal(rows.size, MAX_REUSED_ROWS);
    assert.notEqual(rows.known(['id-1', 'a']), kept);
    assert.equal(rows.known(['id-1', 'a']), undefined);
  });
});

describe(`reused rows on ${backendName}`, () => {
  let t: TestDb;
  before(async () => {
    t = await createTestDb();
    await t.db.exec('CREATE TABLE reuse_probe (id text PRIMARY KEY, name text, tags text[], at timestamptz)');
    await t.db.query(
      `INSERT INTO reuse_probe VALUES ('a', 'first', '{x,y}', now()), ('b', 'second', '{}', NULL)`,
    );
  });
  after(() => t.dispose());

  const READ = `${REUSE_ROWS} SELECT id, name, tags, at FROM reuse_probe WHERE id = ANY($1::text[]) ORDER BY id`;
  type Probe = { id: string; name: string; tags: string[]; at: Date | null };

  test('an unchanged row read again is one frozen object, shared by every read', async () => {
    const [first] = await t.db.query<Probe>(READ, [['a', 'b']]);
    assert.equal(first?.name, 'first');
    assert.deepEqual(first?.tags, ['x', 'y']);
    assert.ok(first?.at instanceof Date);
    assert.equal(Object.isFrozen(first), false, "a row read once is the caller's own");
    const [second, b] = await t.db.query<Probe>(READ, [['a', 'b']]);
    const [third] = await t.db.query<Probe>(READ, [['a']]);
    assert.deepEqual(second, first);
    assert.deepEqual(b, { id: 'b', name: 'second', tags: [], at: null });
    assert.ok(Object.isFrozen(second) && Object.isFrozen(second?.tags), 'read again: frozen, deeply');
    assert.equal(third, second, 'and the same object from then on');
    assert.throws(() => {
      (third as Probe).name = 'changed';
    }, TypeError);
  });

  test('a changed row is read with its new values at once; the object read before keeps the old ones', async () => {
    await t.db.query<Probe>(READ, [['a']]);
    const [before] = await t.db.query<Probe>(READ, [['a']]);
    await t.db.query(`UPDATE reuse_probe SET tags = '{x,y,z}' WHERE id = 'a'`);
    const [after] = await t.db.query<Probe>(READ, [['a']]);
    assert.deepEqual(after?.tags, ['x', 'y', 'z']);
    assert.deepEqual(before?.tags, ['x', 'y']);
    assert.notEqual(after, before);
    assert.equal(Object.isFrozen(after), false, 'a changed row is new again');
  });

  test('reads without the mark get rows of their own that the caller may change', async () => {
    const [row] = await t.db.query<Probe>('SELECT id, name, tags, at FROM reuse_probe WHERE id = $1', ['a']);
    assert.equal(Object.isFrozen(row), false);
    (row as Probe).name = 'mine';
    const [again] = await t.db.query<Probe>('SELECT id, name, tags, at FROM reuse_probe WHERE id = $1', [
      'a',
    ]);
    assert.equal(again?.name, 'first');
  });
});
