import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { canonicalJson } from '../src/lib/canonical-json.ts';

/** The definition: JSON.stringify's value with every object's keys sorted. */
function reference(value: unknown): string {
  const sort = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sort)
      : v !== null && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
          )
        : v;
  return JSON.stringify(sort(JSON.parse(JSON.stringify(value))));
}

describe('canonical JSON', () => {
  test('is JSON with the keys sorted at every level', () => {
    const value = {
      b: 1,
      a: [{ z: 'x"y', y: null }, 2, undefined, 'é\n'],
      c: { when: new Date('2030-01-01T00:00:00Z'), gone: undefined, n: -0.5 },
    };
    assert.equal(canonicalJson(value), reference(value));
  });

  test('objects with the same keys in another order give the same text', () => {
    assert.equal(canonicalJson({ a: 1, b: { c: 2, d: 3 } }), canonicalJson({ b: { d: 3, c: 2 }, a: 1 }));
  });

  test('a shape met again is written with its own values, and a shape like it is not taken for it', () => {
    assert.equal(canonicalJson({ id: 1, name: 'one' }), '{"id":1,"name":"one"}');
    assert.equal(canonicalJson({ id: 2, name: 'two' }), '{"id":2,"name":"two"}');
    // Same length and first key, other keys.
    assert.equal(canonicalJson({ id: 3, label: 'three' }), '{"id":3,"label":"three"}');
    assert.equal(canonicalJson({ id: 4, name: undefined }), '{"id":4}');
  });

  test('stays exact past the number of shapes it remembers', () => {
    for (let i = 0; i < 700; i++) {
      const value = { [`k${i}`]: i, [`a${i}`]: { [`z${i}`]: [i] } };
      assert.equal(canonicalJson(value), reference(value));
    }
  });
});
