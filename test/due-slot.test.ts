import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { nextSlot, type ScheduleSpec } from '../src/schedule/slots.ts';
import { MISSED_COUNT_CAP, planDueSlot } from '../src/scheduler/due-slot.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const SEED = Number(process.env.SLOTS_SEED ?? 20271031);

/** Every slot of `spec` in [from, to], by stepping the slot maths (itself tested against a reference). */
function slotsBetween(spec: ScheduleSpec, from: Date, to: Date): Date[] {
  const out: Date[] = [];
  let s: Date | null = from;
  while (s && s.getTime() <= to.getTime()) {
    out.push(s);
    s = nextSlot(spec, s);
  }
  return out;
}

const specArb: fc.Arbitrary<ScheduleSpec> = fc.record({
  schedule: fc.constantFrom('hourly' as const, 'daily' as const),
  scheduleTime: fc
    .tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }))
    .map(([h, m]) => `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}`),
  timezone: fc.constantFrom(
    'UTC',
    'Europe/Berlin',
    'America/Santiago',
    'Asia/Kathmandu',
    'Australia/Lord_Howe',
  ),
});

describe('the catch-up plan for a due task', () => {
  test('after any outage: at most one run, for the latest passed slot inside the window; every other passed slot is missed', () => {
    fc.assert(
      fc.property(
        specArb,
        fc.integer({ min: Date.UTC(2027, 0, 1), max: Date.UTC(2027, 11, 1) }),
        fc.integer({ min: 0, max: 72 * HOUR }),
        fc.constantFrom(0, 15 * MIN, HOUR, 6 * HOUR),
        (spec, startMs, outageMs, windowMs) => {
          const dueAt = nextSlot(spec, new Date(startMs));
          assert.ok(dueAt);
          const now = new Date(dueAt.getTime() + outageMs);
          const plan = planDueSlot(spec, dueAt, now, windowMs);
          const passed = slotsBetween(spec, dueAt, now);
          const latest = passed.at(-1);
          assert.ok(latest, 'the due slot itself has passed');
          const inWindow = latest.getTime() >= now.getTime() - windowMs;
          assert.equal(plan.runSlot?.getTime(), inWindow ? latest.getTime() : undefined);
          assert.equal(
            plan.missed + (plan.runSlot ? 1 : 0),
            passed.length,
            'every passed slot is run or missed',
          );
          assert.equal(plan.nextRunAt?.getTime(), nextSlot(spec, latest)?.getTime());
          assert.ok(plan.nextRunAt && plan.nextRunAt.getTime() > now.getTime());
        },
      ),
      { numRuns: 300, seed: SEED },
    );
  });

  test('a slot exactly at the window edge still runs; one a millisecond older does not', () => {
    const spec: ScheduleSpec = { schedule: 'hourly', scheduleTime: '00:00', timezone: 'UTC' };
    const slot = new Date('2027-06-01T10:00:00Z');
    const window = 30 * MIN;
    const edge = planDueSlot(spec, slot, new Date(slot.getTime() + window), window);
    assert.equal(edge.runSlot?.toISOString(), '2027-06-01T10:00:00.000Z');
    const late = planDueSlot(spec, slot, new Date(slot.getTime() + window + 1), window);
    assert.deepEqual(late, { runSlot: null, missed: 1, nextRunAt: new Date('2027-06-01T11:00:00Z') });
  });

  test('a years-long outage of a minutely cron is planned without walking every missed slot', () => {
    const spec: ScheduleSpec = { schedule: 'hourly', cronExpression: '* * * * *', timezone: 'UTC' };
    const dueAt = new Date('2020-01-01T00:00:00Z');
    const now = new Date('2027-01-01T00:00:30Z');
    const plan = planDueSlot(spec, dueAt, now, HOUR);
    assert.equal(plan.runSlot?.toISOString(), '2027-01-01T00:00:00.000Z');
    assert.ok(plan.missed >= MISSED_COUNT_CAP);
    assert.equal(plan.nextRunAt?.toISOString(), '2027-01-01T00:01:00.000Z');
  });

  test('a once task has no slot after its run', () => {
    const spec: ScheduleSpec = { schedule: 'once', timezone: 'UTC' };
    const at = new Date('2027-06-01T10:00:00Z');
    assert.deepEqual(planDueSlot(spec, at, at, HOUR), { runSlot: at, missed: 0, nextRunAt: null });
    assert.deepEqual(planDueSlot(spec, at, new Date(at.getTime() + 2 * HOUR), HOUR), {
      runSlot: null,
      missed: 1,
      nextRunAt: null,
    });
  });
});
