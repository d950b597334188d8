// The background-work kernel on its own: the Loop every background part runs on, and the
// registry that starts and stops the parts of a process.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type BackgroundPart, BackgroundRegistry } from '../src/lib/background.ts';
import { createLogger } from '../src/lib/logger.ts';
import { Loop, type LoopOptions } from '../src/lib/loop.ts';
import { waitFor } from './helpers/wait.ts';

const log = createLogger('silent');

/** A channel that the test notifies by hand, as NOTIFY would. */
function fakeChannel() {
  const listeners = new Set<(payload: string) => void>();
  return {
    channel: {
      name: 'svc_test',
      listen: async (_name: string, onNotify: (payload: string) => void) => {
        listeners.add(onNotify);
        return async () => {
          listeners.delete(onNotify);
        };
      },
    } satisfies LoopOptions['channel'],
    notify: () => {
      for (const l of listeners) l('');
    },
    get listening() {
      return listeners.size;
    },
  };
}

describe('Loop', () => {
  test('a pass runs at start, and notifications during a pass merge into one more pass', async () => {
    const ch = fakeChannel();
    let passes = 0;
    let release: (() => void) | undefined;
    const loop = new Loop({
      name: 'test',
      pollMs: 60_000,
      channel: ch.channel,
      log,
      pass: async () => {
        passes++;
        if (passes === 1) await new Promise<void>((r) => (release = r));
        return undefined;
      },
    });
    await loop.start();
    await waitFor('the first pass', async () => release);
    ch.notify();
    ch.notify();
    ch.notify();
    release?.();
    await waitFor('the second pass', async () => passes === 2 || undefined);
    await loop.stop();
    assert.equal(passes, 2);
    assert.equal(ch.listening, 0, 'stop unsubscribes from the channel');
  });

  test('the loop wakes at the delay its pass returns, and a failed pass is retried', async () => {
    let passes = 0;
    const loop = new Loop({
      name: 'test',
      pollMs: 60_000,
      retryMs: 10,
      log,
      pass: async () => {
        passes++;
        if (passes === 2) throw new Error('the database is away');
        return passes < 4 ? 5 : undefined;
      },
    });
    await loop.start();
    await waitFor('four passes', async () => passes >= 4 || undefined);
    await loop.stop();
    assert.equal(passes, 4);
  });

  test('no pass runs after stop, even when woken', async () => {
    let passes = 0;
    const loop = new Loop({
      name: 'test',
      pollMs: 60_000,
      log,
      pass: async () => {
        passes++;
        return undefined;
      },
    });
    await loop.start();
    await waitFor('the first pass', async () => passes === 1 || undefined);
    await loop.stop();
    loop.wake();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(passes, 1);
    assert.equal(loop.stopping, true);
  });

  // A stop that never aborts would wait forever for the slow work: the timeout turns that into a failure.
  test('stop lets tracked work finish within the grace period, then aborts it with shutdown', {
    timeout: 10_000,
  }, async () => {
    const loop = new Loop({ name: 'test', pollMs: 60_000, log, pass: async () => undefined });
    await loop.start();
    const quick = new AbortController();
    let quickDone = false;
    loop.track(
      quick,
      new Promise<void>((r) => setTimeout(r, 5)).then(() => {
        quickDone = true;
      }),
    );
    const slow = new AbortController();
    loop.track(slow, new Promise<void>((resolve) => slow.signal.addEventListener('abort', () => resolve())));
    await loop.stop(50);
    assert.equal(quickDone, true);
    assert.equal(quick.signal.aborted, false, 'work that ended in time is not aborted');
    assert.equal(slow.signal.aborted, true);
    assert.equal(slow.signal.reason, 'shutdown');
  });
});

describe('BackgroundRegistry', () => {
  function part(name: string, events: string[], o: { failStop?: boolean } = {}): BackgroundPart {
    return {
      start: async () => {
        events.push(`start ${name}`);
      },
      stop: async (graceMs) => {
        events.push(`stop ${name} ${graceMs}`);
        if (o.failStop) throw new Error(`${name} could not stop`);
      },
    };
  }

  test('parts start in the order added and stop by stage: producers, consumers, listeners', async () => {
    const events: string[] = [];
    const registry = new BackgroundRegistry();
    registry.add('listener', part('listener', events), { stage: 'listener' });
    registry.add('worker', part('worker', events), { stage: 'consumer' });
    registry.add('scheduler', part('scheduler', events), { stage: 'producer' });
    await registry.start({ loops: true });
    await registry.stop(30, async () => {
      events.push('alongside consumers');
    });
    assert.deepEqual(events, [
      'start listener',
      'start worker',
      'start scheduler',
      'stop scheduler 30',
      'stop worker 30',
      'alongside consumers',
      'stop listener 30',
    ]);
  });

  test('without loops only the parts marked always start, and only started parts are stopped', async () => {
    const events: string[] = [];
    const registry = new BackgroundRegistry();
    registry.add('worker', part('worker', events), { stage: 'consumer' });
    registry.add('pruning', part('pruning', events), { stage: 'producer', always: true });
    await registry.start({ loops: false });
    await registry.stop(0);
    assert.deepEqual(events, ['start pruning', 'stop pruning 0']);
  });

  test('a part that fails to stop does not keep the others running, and its failure is reported', async () => {
    const events: string[] = [];
    const registry = new BackgroundRegistry();
    registry.add('scheduler', part('scheduler', events, { failStop: true }), { stage: 'producer' });
    registry.add('worker', part('worker', events), { stage: 'consumer' });
    await registry.start({ loops: true });
    await assert.rejects(registry.stop(0), /scheduler could not stop/);
    assert.deepEqual(events, ['start scheduler', 'start worker', 'stop scheduler 0', 'stop worker 0']);
  });
});
