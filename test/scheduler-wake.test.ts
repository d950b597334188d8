import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_SLEEP_MS, slotNeedsWake } from '../src/schedule/wake.ts';

describe('when a new or moved slot wakes the schedulers', () => {
  const now = new Date('2030-01-01T10:00:00Z');
  const inMs = (ms: number) => new Date(now.getTime() + ms);

  test('a slot that is due now, or sooner than a scheduler may sleep, wakes them', () => {
    assert.equal(slotNeedsWake(now, now), true);
    assert.equal(slotNeedsWake(inMs(-5_000), now), true);
    assert.equal(slotNeedsWake(inMs(MAX_SLEEP_MS - 1), now), true);
  });

  test('a slot further away than the longest sleep plus the clock allowance does not: their next look finds it', () => {
    assert.equal(slotNeedsWake(inMs(2 * MAX_SLEEP_MS + 1), now), false);
    assert.equal(slotNeedsWake(inMs(7 * 24 * 3600_000), now), false);
  });

  test('a task without a slot (paused or finished) wakes nobody', () => {
    assert.equal(slotNeedsWake(null, now), false);
  });
});
