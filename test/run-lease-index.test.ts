import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Db, Queryable } from '../src/db/db.ts';
import { claimRuns } from '../src/db/sql/run-claim.ts';
import { lockExpiredLeases, renewLeases } from '../src/db/sql/run-queue.ts';
import { backendName } from './helpers/db.ts';
import { explainAnalyze, type PlanNode, rowsRead } from './helpers/plans.ts';
import { insertTestRun, newTask } from './helpers/runs.ts';
import { startTestService } from './helpers/service.ts';

/**
 * Running runs have no index on their lease (migration 0027): lease recovery reads them through
 * runs_running_org_idx, and a renewal, which changes the lease only, changes no indexed column.
 */

class RolledBack extends Error {}

/** Runs `body` in a transaction that is rolled back. */
async function rolledBack(db: Db, body: (tx: Queryable) => Promise<void>): Promise<void> {
  await db
    .transaction(async (tx) => {
      await body(tx);
      throw new RolledBack();
    })
    .catch((err: unknown) => {
      if (!(err instanceof RolledBack)) throw err;
    });
}

test(`lease recovery reads the running runs only, however many runs have ended (${backendName})`, async () => {
  const svc = await startTestService();
  try {
    const org = await svc.createOrg('paid');
    const task = await newTask(svc, org);
    const db = svc.service.deps.db;
    let at = Date.now() - 3_600_000;
    await db.transaction(async (tx) => {
      for (let i = 0; i < 1_005; i++) await insertTestRun(tx, org, task.id, { now: new Date(at++) });
    });
    // 1,000 ended; of the 5 newest, running, 2 with an expired lease.
    await db.query(`UPDATE runs SET status = 'completed', completed_at = now()`);
    await db.query(
      `UPDATE runs SET status = 'running', lease_owner = 'gone', started_at = now(),
              lease_expires_at = now() + CASE WHEN n <= 2 THEN interval '-1 minute' ELSE interval '1 minute' END
         FROM (SELECT id, row_number() OVER (ORDER BY created_at DESC) AS n FROM runs) r
        WHERE runs.id = r.id AND r.n <= 5`,
    );
    await db.query('ANALYZE runs');
    await rolledBack(db, async (tx) => {
      let plan: PlanNode | undefined;
      const explaining: Queryable = {
        query: async <R>(sql: string, params?: readonly unknown[]) => {
          plan = await explainAnalyze(tx, sql, params);
          return [] as R[];
        },
        exec: (sql) => tx.exec(sql),
      };
      await lockExpiredLeases(explaining, new Date(), []);
      assert.ok(plan, 'the statement was explained');
      const read = rowsRead(plan, 'runs');
      assert.ok(read >= 2 && read <= 20, `recovery read ${read} runs (5 running, 2 expired)`);
      const expired = await lockExpiredLeases(tx, new Date(), []);
      assert.equal(expired.length, 2);
    });
  } finally {
    await svc.close();
  }
});

test(`a lease's renewal is a HOT update: it adds no entry to any index of runs (${backendName})`, async () => {
  const svc = await startTestService();
  try {
    const org = await svc.createOrg('paid');
    const task = await newTask(svc, org);
    const db = svc.service.deps.db;
    const runId = await insertTestRun(db, org, task.id);
    const claimed = await claimRuns(db, {
      workerId: 'w1',
      now: null,
      leaseMs: 60_000,
      limit: 1,
      orgLimit: 1,
    });
    assert.deepEqual(
      claimed.runs.map((c) => c.run.id),
      [runId],
    );
    await rolledBack(db, async (tx) => {
      // The counters of the transaction's own updates of runs (read back at once, unlike pg_stat_user_tables).
      const counts = async () => {
        const [row] = await tx.query<{ updated: number; hot: number }>(
          `SELECT pg_stat_get_xact_tuples_updated('runs'::regclass)::int AS updated,
                  pg_stat_get_xact_tuples_hot_updated('runs'::regclass)::int AS hot`,
        );
        return row ?? { updated: -1, hot: -1 };
      };
      const before = await counts();
      for (let i = 1; i <= 3; i++) {
        const held = await renewLeases(tx, 'w1', [runId], new Date(Date.now() + i * 1_000), 60_000);
        assert.deepEqual([...held], [runId]);
      }
      const after = await counts();
      assert.equal(after.updated - before.updated, 3);
      assert.equal(after.hot - before.hot, 3, 'each renewal was a HOT update');
    });
  } finally {
    await svc.close();
  }
});
