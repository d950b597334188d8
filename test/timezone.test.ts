import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { isKnownTimeZone, wallTime, wallTimeUncached } from '../src/schedule/timezone.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
// A fixed seed keeps CI deterministic; set TIMEZONE_SEED to explore other seeds locally.
const SEED = Number(process.env.TIMEZONE_SEED ?? 20261123);

/** Instants of the first minute on either side of every offset change between from and to. */
function transitionsOf(zone: string, from: number, to: number): number[] {
  const found: number[] = [];
  let prev = wallTimeUncached(zone, from) - from;
  for (let t = from + HOUR; t <= to; t += HOUR) {
    const offset = wallTimeUncached(zone, t) - t;
    if (offset !== prev) {
      // Bisect to the second: the change lies in (t - HOUR, t].
      let lo = t - HOUR;
      let hi = t;
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
        if (wallTimeUncached(zone, mid) - mid === prev) lo = mid;
        else hi = mid;
      }
      found.push(hi);
      prev = offset;
    }
  }
  return found;
}

test('the hourly offset cache gives the exact wall time on both sides of every 2026–2027 transition', () => {
  const zones = [
    'Europe/Berlin',
    'America/New_York',
    'America/Santiago',
    'America/St_Johns',
    'Australia/Lord_Howe',
    'Asia/Tehran',
    'Pacific/Chatham',
    'Africa/Casablanca',
  ];
  let checked = 0;
  for (const zone of zones) {
    const transitions = transitionsOf(zone, Date.UTC(2026, 0, 1), Date.UTC(2028, 0, 1));
    for (const at of transitions) {
      // Every second of the minutes around the change, in the order a scheduler might ask.
      for (let t = at - 2 * MIN; t <= at + 2 * MIN; t += 1000) {
        for (const ms of [0, 1, 999]) {
          assert.equal(wallTime(zone, t + ms), wallTimeUncached(zone, t + ms), `${zone} at ${t + ms}`);
          checked++;
        }
      }
    }
  }
  // Berlin, New York, Santiago, St Johns, Lord Howe and Chatham change twice a year.
  assert.ok(checked > 6 * 4 * 241 * 3, `only ${checked} instants checked`);
});

test('the cached wall time equals Intl for random instants in every zone Intl knows, 1850–2100', () => {
  const zones = Intl.supportedValuesOf('timeZone');
  fc.assert(
    fc.property(
      fc.constantFrom(...zones),
      fc.integer({ min: Date.UTC(1850, 0, 1), max: Date.UTC(2100, 0, 1) }),
      fc.integer({ min: 0, max: 3 * HOUR }),
      (zone, instant, later) => {
        // A second instant within a few hours of the first reuses (or straddles) its cached hour.
        assert.equal(wallTime(zone, instant), wallTimeUncached(zone, instant));
        assert.equal(wallTime(zone, instant + later), wallTimeUncached(zone, instant + later));
      },
    ),
    { seed: SEED, numRuns: 3000 },
  );
});

test('instants at the ends of the Date range are answered without the cache, as Intl answers them', () => {
  for (const instant of [8.64e15, -8.64e15, 8.64e15 - 1000]) {
    assert.equal(wallTime('Europe/Berlin', instant), wallTimeUncached('Europe/Berlin', instant));
  }
});

test('the default zone, answered without Intl, has the wall time Intl gives it across the whole Date range', () => {
  assert.equal(isKnownTimeZone('UTC'), true);
  fc.assert(
    fc.property(fc.integer({ min: -8.64e15, max: 8.64e15 }), (instant) => {
      assert.equal(wallTime('UTC', instant), wallTimeUncached('UTC', instant));
    }),
    { seed: SEED, numRuns: 3000 },
  );
  for (const instant of [8.64e15, -8.64e15, 0, Date.UTC(2026, 2, 29, 1)]) {
    assert.equal(wallTime('UTC', instant), wallTimeUncached('UTC', instant));
  }
});
