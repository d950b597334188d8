import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import pg from 'pg';
import { parseTextArray, parseTimestamptz } from '../src/db/postgres.ts';

const general = pg.types.getTypeParser(1184, 'text') as (v: string) => unknown;
const generalTextArray = (pg.types.getTypeParser as (oid: number, format: 'text') => (v: string) => unknown)(
  1009,
  'text',
);

/** What a parser makes of a text: its value, or the error it throws. */
function outcome(parse: (v: string) => unknown, v: string): unknown {
  try {
    return { value: parse(v) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** A timestamptz as PostgreSQL writes it: `YYYY-MM-DD HH:MM:SS[.f{1,6}]<zone>`. */
const written = fc
  .record({
    year: fc.integer({ min: 1, max: 12000 }),
    month: fc.integer({ min: 1, max: 12 }),
    day: fc.integer({ min: 1, max: 28 }),
    hour: fc.integer({ min: 0, max: 23 }),
    minute: fc.integer({ min: 0, max: 59 }),
    second: fc.integer({ min: 0, max: 59 }),
    fraction: fc.option(fc.stringMatching(/^[0-9]{1,6}$/), { nil: undefined }),
    zone: fc.constantFrom('+00', '+00', '+00', '+01', '-05', '+05:30', '+00 BC'),
  })
  .map((t) => {
    const two = (n: number) => String(n).padStart(2, '0');
    const bc = t.zone.endsWith(' BC');
    return `${String(t.year).padStart(4, '0')}-${two(t.month)}-${two(t.day)} ${two(t.hour)}:${two(t.minute)}:${two(t.second)}${t.fraction === undefined ? '' : `.${t.fraction}`}${bc ? '+00 BC' : t.zone}`;
  });

const same = (v: string) => {
  const a = parseTimestamptz(v);
  const b = general(v);
  assert.equal(a instanceof Date ? a.getTime() : a, b instanceof Date ? b.getTime() : b, v);
};

describe('values read from PostgreSQL by the fast parsers', () => {
  test('read the same instant as the driver reads them, whatever their form', () => {
    fc.assert(
      fc.property(written, (v) => same(v)),
      { numRuns: 5000 },
    );
    for (const v of [
      '2026-11-26 09:53:37+00',
      '2026-11-26 09:53:37.1+00',
      '2026-11-26 09:53:37.123456+00',
      '2026-11-26 09:53:37.999999+00',
      '2026-11-26 09:53:37.005+00',
      '0099-01-01 00:00:00+00',
      '1000-01-01 00:00:00+00',
      'infinity',
      '-infinity',
      '2026-11-26 09:53:37.123456+01',
      '2026-11-26 09:53:37.123456-03:30',
    ]) {
      same(v);
    }
  });

  test('a text[] reads as the driver reads it, whatever its elements', () => {
    // Element texts as PostgreSQL may write them, quoted or not, and any text at all.
    const element = fc.oneof(
      fc.constantFrom('monday', 'thursday', 'NULL', 'null', '"NULL"', '""', '"a,b"', '"a\\"b"', 'a b', ' x'),
      fc.string({ maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(element, { maxLength: 6 }), fc.boolean(), (items, nested) => {
        const v = nested ? `{{${items.join(',')}}}` : `{${items.join(',')}}`;
        assert.deepEqual(outcome(parseTextArray, v), outcome(generalTextArray, v), v);
      }),
      { numRuns: 5000 },
    );
    for (const v of ['{}', '{monday,thursday}', '{NULL,x}', '[0:1]={a,b}', '{a,,b}', '{,a}', '{a,}']) {
      assert.deepEqual(outcome(parseTextArray, v), outcome(generalTextArray, v), v);
    }
  });
});
