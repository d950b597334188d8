import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RateCounter } from '../src/domain/rate-counter.ts';

/** The shared per-window counter table, as the processes see it through `addHits`. */
function sharedCounter() {
  const hits = new Map<string, number>();
  let claims = 0;
  return {
    claim: async (bucket: string, window: number, n: number) => {
      claims++;
      const key = `${bucket}@${window}`;
      const total = (hits.get(key) ?? 0) + n;
      hits.set(key, total);
      return total;
    },
    get claims() {
      return claims;
    },
  };
}

const at = (iso: string) => new Date(iso);

describe('rate counting claimed ahead per process', () => {
  test('one process serves exactly the limit, counting down one by one, then refuses', async () => {
    const shared = sharedCounter();
    const counter = new RateCounter(shared.claim);
    const now = at('2030-01-01T10:00:10Z');
    for (let i = 1; i <= 60; i++) {
      const state = await counter.hit('org:a', 60, now);
      assert.equal(state.exceeded, false);
      assert.equal(state.remaining, 60 - i);
    }
    assert.equal((await counter.hit('org:a', 60, now)).exceeded, true);
    assert.ok(shared.claims < 60, `${shared.claims} claims for 60 requests`);
  });

  test('three processes sharing one counter serve the limit exactly once in all, whatever the interleaving', async () => {
    const shared = sharedCounter();
    const processes = [0, 1, 2].map(() => new RateCounter(shared.claim));
    const now = at('2030-01-01T10:00:10Z');
    let served = 0;
    // Concurrent bursts from every process until all of them refuse.
    for (let round = 0; round < 40; round++) {
      const states = await Promise.all(
        processes.flatMap((p, i) =>
          Array.from({ length: 3 + i + (round % 4) }, () => p.hit('org:b', 300, now)),
        ),
      );
      served += states.filter((s) => !s.exceeded).length;
    }
    assert.equal(served, 300);
  });

  test('a burst of simultaneous requests is served up to the limit, and the shared counter is not inflated', async () => {
    const shared = sharedCounter();
    const counter = new RateCounter(shared.claim);
    const now = at('2030-01-01T10:00:10Z');
    const states = await Promise.all(Array.from({ length: 100 }, () => counter.hit('org:e', 60, now)));
    assert.equal(states.filter((s) => !s.exceeded).length, 60);
    // One claim at a time per bucket, never more than is left: what was counted is what was
    // served plus the one hit that found the window full.
    const counted = await shared.claim('org:e', states[0]?.reset ? states[0].reset - 60 : 0, 0);
    assert.equal(counted, 61);
    assert.ok(shared.claims <= 10, `${shared.claims} claims`);
  });

  test('a new window starts a new budget, and buckets do not share', async () => {
    const shared = sharedCounter();
    const counter = new RateCounter(shared.claim);
    for (let i = 0; i < 5; i++) await counter.hit('org:c', 5, at('2030-01-01T10:00:10Z'));
    assert.equal((await counter.hit('org:c', 5, at('2030-01-01T10:00:50Z'))).exceeded, true);
    assert.equal((await counter.hit('org:d', 5, at('2030-01-01T10:00:50Z'))).remaining, 4);
    const next = await counter.hit('org:c', 5, at('2030-01-01T10:01:00Z'));
    assert.equal(next.exceeded, false);
    assert.equal(next.remaining, 4);
  });

  test('a steady stream never waits for the database: the next batch is claimed while a quarter of the last is left', async () => {
    const shared = sharedCounter();
    // Claims after the first are held until released, like a busy database.
    let release: () => void = () => undefined;
    let held = 0;
    const slowClaim = async (bucket: string, window: number, n: number) => {
      if (shared.claims >= 1) {
        held++;
        await new Promise<void>((r) => {
          release = r;
        });
      }
      return shared.claim(bucket, window, n);
    };
    const counter = new RateCounter(slowClaim);
    const now = at('2030-01-01T10:00:10Z');
    const limit = 1_000_000;
    await counter.hit('org:s', limit, now); // the first claim grants a batch of 200
    let served = 1;
    // The batch is served without waiting, although a claim is stuck the whole time.
    while (served < 200) {
      const state = await counter.hit('org:s', limit, now);
      assert.equal(state.exceeded, false);
      served++;
    }
    assert.equal(held, 1, 'the next batch was claimed before this one ran out');
    const waiting = counter.hit('org:s', limit, now);
    release();
    assert.equal((await waiting).remaining, limit - 201);
  });
  test('a hit decided from memory counts like an awaited one, and asks nothing when it cannot decide', async () => {
    const shared = sharedCounter();
    const counter = new RateCounter(shared.claim);
    const now = at('2030-01-01T10:00:10Z');
    // Nothing claimed yet in this window: no answer, and nothing counted or claimed.
    assert.equal(counter.hitNow('org:c', 10, now), undefined);
    assert.equal(shared.claims, 0);
    const first = await counter.hit('org:c', 10, now);
    assert.equal(first.remaining, 9);
    let served = 1;
    for (;;) {
      const state = counter.hitNow('org:c', 10, now) ?? (await counter.hit('org:c', 10, now));
      if (state.exceeded) break;
      served++;
      assert.equal(state.remaining, 10 - served);
    }
    assert.equal(served, 10, 'the limit is served exactly, partly from memory');
    // Once the window is known to be exhausted, the refusal comes from memory too.
    assert.equal(counter.hitNow('org:c', 10, now)?.exceeded, true);
    // A new window starts with nothing in memory.
    assert.equal(counter.hitNow('org:c', 10, at('2030-01-01T10:01:10Z')), undefined);
  });
});
