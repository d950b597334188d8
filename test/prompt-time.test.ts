// The time context of a prompt (src/runner/prompt.ts): the local date and time in the task's
// zone, to the minute, also when the same minute has just been formatted for another run.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { TIME_CONTEXT_FORMAT, TIME_CONTEXT_LOCALE, timeContext } from '../src/runner/prompt.ts';

test('the time context gives the minute in the task zone, run after run, and moves on with the clock', () => {
  const at = (iso: string) => timeContext('Asia/Kathmandu', new Date(iso), null).split('\n')[0];
  assert.match(at('2026-03-01T06:14:10Z') ?? '', /Sunday, 1 March 2026 at 11:59 /);
  assert.match(at('2026-03-01T06:14:59.999Z') ?? '', /Sunday, 1 March 2026 at 11:59 .*06:14:59\.999Z/);
  assert.match(at('2026-03-01T06:15:00Z') ?? '', /Sunday, 1 March 2026 at 12:00 /);
  // The same instant in another zone, and the slot of a scheduled run in its own minute.
  const paris = timeContext(
    'Europe/Paris',
    new Date('2026-03-01T06:15:00Z'),
    new Date('2026-03-01T06:00:00Z'),
  );
  assert.match(paris, /Sunday, 1 March 2026 at 07:15 CET/);
  assert.match(paris, /scheduled time Sunday, 1 March 2026 at 07:00 CET/);
});

test('the default zone reads as Intl would write it, for any minute of four centuries', () => {
  // The UTC text is written without Intl (src/runner/prompt.ts); what Intl writes with the format
  // of every other zone is the reference.
  const intl = new Intl.DateTimeFormat(TIME_CONTEXT_LOCALE, { ...TIME_CONTEXT_FORMAT, timeZone: 'UTC' });
  fc.assert(
    fc.property(
      fc.integer({ min: Date.UTC(1900, 0, 1), max: Date.UTC(2300, 0, 1) }),
      fc.integer({ min: -Date.UTC(1971, 0, 1), max: Date.UTC(1971, 0, 1) }),
      (now, slotDelta) => {
        const slot = new Date(now + slotDelta);
        const text = timeContext('UTC', new Date(now), slot);
        assert.ok(text.includes(`Current date and time: ${intl.format(now)} (time zone UTC;`), text);
        assert.ok(text.includes(`scheduled time ${intl.format(slot)} (`), text);
      },
    ),
    { seed: 20261129, numRuns: 2000 },
  );
});
