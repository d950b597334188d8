import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { nextSlot, type ScheduleSpec } from '../src/schedule/slots.ts';
import { MISSED_COUNT_CAP, MISSED_RECORDS_PER_CLAIM, planDueSlot } from '../src/scheduler/due-slot.ts';
import { missedSlotRecords } from '../src/scheduler/slot-records.ts';

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
          // Every passed slot has exactly one record: the run's, or a missed one (the oldest
          // folded into one record that counts them once a claim misses more than the bound).
          const records = missedSlotRecords('t', plan, windowMs);
          const missedSlots = passed.filter((p) => p.getTime() !== plan.runSlot?.getTime());
          assert.equal(
            records.reduce((n, r) => n + r.slots, 0),
            missedSlots.length,
            'records add up',
          );
          const singles = records.filter((r) => r.slots === 1 && r.slotAt !== plan.firstMissed);
          assert.deepEqual(
            singles.map((r) => r.slotAt.getTime()),
            missedSlots.slice(-MISSED_RECORDS_PER_CLAIM).map((p) => p.getTime()),
          );
          const at = [
            ...records.map((r) => r.slotAt.getTime()),
            ...(plan.runSlot ? [plan.runSlot.getTime()] : []),
          ];
          assert.equal(new Set(at).size, at.length, 'no slot recorded twice');
          assert.ok(records.length <= MISSED_RECORDS_PER_CLAIM + 1);
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
    assert.deepEqual(late, {
      runSlot: null,
      missed: 1,
      nextRunAt: new Date('2027-06-01T11:00:00Z'),
      missedSlots: [{ at: slot, why: 'window' }],
      firstMissed: null,
      missedCapped: false,
    });
  });

  test('a years-long outage of a minutely cron is planned without walking every missed slot', () => {
    const spec: ScheduleSpec = { schedule: 'hourly', cronExpression: '* * * * *', timezone: 'UTC' };
    const dueAt = new Date('2020-01-01T00:00:00Z');
    const now = new Date('2027-01-01T00:00:30Z');
    const plan = planDueSlot(spec, dueAt, now, HOUR);
    assert.equal(plan.runSlot?.toISOString(), '2027-01-01T00:00:00.000Z');
    assert.ok(plan.missed >= MISSED_COUNT_CAP);
    assert.equal(plan.nextRunAt?.toISOString(), '2027-01-01T00:01:00.000Z');
    // What gets recorded stays bounded: the newest missed slots one by one, the rest folded.
    assert.ok(plan.missedCapped);
    assert.equal(plan.missedSlots.length, MISSED_RECORDS_PER_CLAIM);
    assert.equal(plan.firstMissed?.toISOString(), dueAt.toISOString());
    const records = missedSlotRecords('t', plan, HOUR);
    assert.equal(records.length, MISSED_RECORDS_PER_CLAIM + 1);
    assert.equal(
      records.reduce((n, r) => n + r.slots, 0),
      plan.missed,
    );
    assert.match(records[0]?.reason ?? '', /counting stops at 10000 slots/);
  });

  test('a once task has no slot after its run', () => {
    const spec: ScheduleSpec = { schedule: 'once', timezone: 'UTC' };
    const at = new Date('2027-06-01T10:00:00Z');
    const none = { missedSlots: [], firstMissed: null, missedCapped: false };
    assert.deepEqual(planDueSlot(spec, at, at, HOUR), { runSlot: at, missed: 0, nextRunAt: null, ...none });
    assert.deepEqual(planDueSlot(spec, at, new Date(at.getTime() + 2 * HOUR), HOUR), {
      runSlot: null,
      missed: 1,
      nextRunAt: null,
      missedSlots: [{ at, why: 'window' }],
      firstMissed: null,
      missedCapped: false,
    });
  });
});
