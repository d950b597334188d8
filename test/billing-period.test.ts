import assert from 'node:assert/strict';
import { test } from 'node:test';
import { currentPeriodEnd, currentPeriodStart } from '../src/domain/billing-period.ts';

const at = (iso: string) => new Date(iso);

test('a period starts on the monthly anniversary of the anchor, at the anchor time of day', () => {
  const anchor = at('2026-01-15T10:30:00Z');
  assert.equal(
    currentPeriodStart(anchor, at('2026-01-20T00:00:00Z')).toISOString(),
    '2026-01-15T10:30:00.000Z',
  );
  assert.equal(
    currentPeriodStart(anchor, at('2026-02-15T10:29:59Z')).toISOString(),
    '2026-01-15T10:30:00.000Z',
  );
  assert.equal(
    currentPeriodStart(anchor, at('2026-02-15T10:30:00Z')).toISOString(),
    '2026-02-15T10:30:00.000Z',
  );
  assert.equal(
    currentPeriodStart(anchor, at('2027-03-01T00:00:00Z')).toISOString(),
    '2027-02-15T10:30:00.000Z',
  );
  assert.equal(
    currentPeriodEnd(anchor, at('2026-01-20T00:00:00Z')).toISOString(),
    '2026-02-15T10:30:00.000Z',
  );
});

test('an anchor on the 31st falls on the last day of shorter months, and comes back to the 31st', () => {
  const anchor = at('2026-01-31T00:00:00Z');
  assert.equal(
    currentPeriodStart(anchor, at('2026-03-01T00:00:00Z')).toISOString(),
    '2026-02-28T00:00:00.000Z',
  );
  assert.equal(
    currentPeriodStart(anchor, at('2028-02-29T12:00:00Z')).toISOString(),
    '2028-02-29T00:00:00.000Z',
  );
  assert.equal(
    currentPeriodStart(anchor, at('2026-03-31T00:00:00Z')).toISOString(),
    '2026-03-31T00:00:00.000Z',
  );
  assert.equal(
    currentPeriodEnd(anchor, at('2026-02-28T00:00:00Z')).toISOString(),
    '2026-03-31T00:00:00.000Z',
  );
});

test('before the anchor (a period that starts later) the anchor itself is the start', () => {
  const anchor = at('2026-06-01T00:00:00Z');
  assert.equal(
    currentPeriodStart(anchor, at('2026-05-20T00:00:00Z')).toISOString(),
    '2026-06-01T00:00:00.000Z',
  );
});

test('every instant lies in [start, end) of its period, and the next period starts where it ends', () => {
  const anchor = at('2025-08-31T23:59:59.999Z');
  for (
    let t = Date.parse('2025-09-01T00:00:00Z');
    t < Date.parse('2028-09-01T00:00:00Z');
    t += 86_400_000 * 3.7
  ) {
    const now = new Date(t);
    const start = currentPeriodStart(anchor, now);
    const end = currentPeriodEnd(anchor, now);
    assert.ok(
      start.getTime() <= t && t < end.getTime(),
      `${now.toISOString()} in [${start.toISOString()}, ${end.toISOString()})`,
    );
    assert.equal(currentPeriodStart(anchor, end).getTime(), end.getTime());
  }
});
