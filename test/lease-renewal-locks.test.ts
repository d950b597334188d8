// A lease renewal takes its runs' rows in id order, as every statement that takes several runs
// does (a worker's write batch, a usage write): taking them in the order its scan met them, it
// deadlocked with a batch holding some of them, and the renewal (or the batch) failed after
// PostgreSQL's deadlock timeout, which with a short lease let the lease expire under a run still
// executing. Two transactions at once: PostgreSQL only.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { renewLeases } from '../src/db/sql/run-queue.ts';
import { newId } from '../src/lib/ids.ts';
import { TEST_DATABASE_URL } from './helpers/db.ts';
import { insertTestRun, newTask } from './helpers/runs.ts';
import { startTestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

describe('a lease renewal', {
  skip:
    !TEST_DATABASE_URL && 'two transactions at once need a PostgreSQL server (run with TEST_DATABASE_URL)',
}, () => {
  test('waits behind a batch that takes the same runs in id order instead of deadlocking with it', async () => {
    const svc = await startTestService();
    try {
      const { db } = svc.service.deps;
      const org = await svc.createOrg('paid');
      // Two running runs held by one worker, the one with the greater id first in the table,
      // so that a scan of the table meets it first.
      const [low, high] = [newId(), newId()].sort() as [string, string];
      for (const id of [high, low])
        await insertTestRun(db, org, (await newTask(svc, org)).id, { id, runningAs: 'w1' });
      let renewal: Promise<Set<string>> | undefined;
      // A batch's locks: the run with the lower id, then (once the renewal waits) the other.
      await db.transaction(async (tx) => {
        await tx.query('SELECT id FROM runs WHERE id = $1 FOR NO KEY UPDATE', [low]);
        renewal = renewLeases(db, 'w1', [high, low], new Date(), 60_000);
        await waitFor('the renewal to wait for a lock', async () => {
          const rows = await db.query(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
          );
          return rows.length ? true : undefined;
        });
        await tx.query('SELECT id FROM runs WHERE id = $1 FOR NO KEY UPDATE', [high]);
      });
      assert.deepEqual([...((await renewal) ?? [])].sort(), [low, high], 'both leases renewed');
    } finally {
      await svc.close();
    }
  });
});
