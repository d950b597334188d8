// Group commit (lib/group-commit.ts): what arrives while a batch is in flight goes into the
// next one, bounded in items and in weight.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GroupCommit } from '../src/lib/group-commit.ts';

/** A group commit whose batches are recorded and complete only when `release` is called. */
function recorded(o: { maxBatch: number; maxWeight?: number }) {
  const batches: number[][] = [];
  const pending: (() => void)[] = [];
  const commit = new GroupCommit<number>({
    maxInFlight: 1,
    maxBatch: o.maxBatch,
    weight: (n) => n,
    ...(o.maxWeight !== undefined && { maxWeight: o.maxWeight }),
    send: (batch) => {
      batches.push(batch);
      return new Promise<void>((resolve) => pending.push(resolve));
    },
  });
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
