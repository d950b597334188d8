// Group commit (lib/group-commit.ts): what arrives while a batch is in flight goes into the
// next one, bounded in items and in weight.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GroupCommit } from '../src/lib/group-commit.ts';

/** A group commit whose batches are recorded and complete only when `release` is called. */
function recorded(o: {
  maxBatch: number;
  maxWeight?: number;
  maxInFlight?: number;
  keyOf?: (n: number) => string;
}) {
  const batches: number[][] = [];
  const pending: (() => void)[] = [];
  const commit = new GroupCommit<number>({
    maxInFlight: o.maxInFlight ?? 1,
    ...(o.keyOf && { keyOf: o.keyOf }),
    maxBatch: o.maxBatch,
    weight: (n) => n,
    ...(o.maxWeight !== undefined && { maxWeight: o.maxWeight }),
    send: (batch) => {
      batches.push(batch);
      return new Promise<void>((resolve) => pending.push(resolve));
    },
  });
  /** Completes the oldest batch in flight. */
  const release = async () => {
    pending.shift()?.();
    await new Promise((r) => setImmediate(r));
  };
  return { commit, batches, release };
}

test('the first item is sent at once and what arrives meanwhile goes into the next batch, at most maxBatch items', async () => {
  const { commit, batches, release } = recorded({ maxBatch: 3 });
  for (const n of [1, 2, 3, 4, 5, 6]) commit.add(n);
  assert.deepEqual(batches, [[1]]);
  await release();
  assert.deepEqual(batches, [[1], [2, 3, 4]]);
  await release();
  await release();
  assert.deepEqual(batches, [[1], [2, 3, 4], [5, 6]]);
});

test('a batch stops before the item that would take it over maxWeight, and an item heavier than maxWeight goes alone', async () => {
  const { commit, batches, release } = recorded({ maxBatch: 10, maxWeight: 100 });
  for (const n of [1, 40, 50, 20, 500, 30]) commit.add(n);
  await release();
  await release();
  await release();
  await release();
  assert.deepEqual(batches, [[1], [40, 50], [20], [500], [30]]);
});

// Keys: the tens digit (11 and 12 share key 1).
const tens = (n: number) => String(Math.floor(n / 10));

test('an item whose key a batch in flight holds waits for it, while items of other keys go out beside it', async () => {
  const { commit, batches, release } = recorded({ maxBatch: 10, maxInFlight: 3, keyOf: tens });
  commit.add(11);
  commit.add(12);
  commit.add(21);
  commit.add(13);
  commit.add(31);
  // 11 holds key 1; 21 and 31 each go out at once in a batch of their own.
  assert.deepEqual(batches, [[11], [21], [31]]);
  await release();
  // 11's batch done: 12 and 13, which waited for it, go together.
  assert.deepEqual(batches, [[11], [21], [31], [12, 13]]);
});

test('a batch takes, in queue order, the items whose keys are free and passes over the held ones', async () => {
  const { commit, batches, release } = recorded({ maxBatch: 10, maxInFlight: 2, keyOf: tens });
  commit.add(11);
  commit.add(21);
  // Both slots are taken: these queue.
  for (const n of [12, 31, 22, 32, 13]) commit.add(n);
  assert.deepEqual(batches, [[11], [21]]);
  await release();
  // Key 1 is free again, key 2 still held: 22 stays for the next batch.
  assert.deepEqual(batches, [[11], [21], [12, 31, 32, 13]]);
  await release();
  assert.deepEqual(batches, [[11], [21], [12, 31, 32, 13], [22]]);
});
