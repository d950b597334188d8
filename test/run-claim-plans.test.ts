import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Db, Queryable } from '../src/db/db.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { type ClaimOptions, claimRuns } from '../src/db/sql/run-claim.ts';
import { insertRun } from '../src/db/sql/runs.ts';
import { newId } from '../src/lib/ids.ts';
import { backendName } from './helpers/db.ts';
import { explainAnalyze, rowsRead } from './helpers/plans.ts';
import { newTask, type Org } from './helpers/runs.ts';
import { startTestService } from './helpers/service.ts';

/**
 * The claim's statements are prepared once per connection and keep their generic plans
 * (run-claim.ts), so a plan is made with whatever statistics the tables have at that moment. The
 * common moment is a queue that has just drained: every run completed, the table analysed (by
 * autovacuum on PostgreSQL, by hand on the embedded database), and pending runs so rare to the
 * planner that any index over them looks alike. A claim made on such a plan must still read
 * only the runs it can take, not the backlog that builds up afterwards.
 */

const quote = (s: string) => `'${s.replaceAll("'", "''")}'`;

test(`a claim reads no more pending runs than it takes, on plans made while no run was pending (${backendName})`, async () => {
  const svc = await startTestService();
  try {
    const orgs: { org: Org; task: { id: string } }[] = [];
    for (let o = 0; o < 4; o++) {
      const org = await svc.createOrg('paid');
      orgs.push({ org, task: await newTask(svc, org) });
    }
    let at = Date.now();
    const pending = async (tx: Queryable, count: number) => {
      for (let i = 0; i < count; i++) {
        const { org, task } = orgs[i % orgs.length] as { org: Org; task: { id: string } };
        await insertRun(tx, {
          id: newId(),
          organizationId: org.organizationId,
          taskId: task.id,
          slotAt: null,
          trigger: 'manual',
          now: new Date(at++),
        });
      }
    };
    const options: ClaimOptions = { workerId: 'w1', now: null, leaseMs: 60_000, limit: 8, orgLimit: 8 };
    // One connection throughout (a pool of one on PostgreSQL): statements are prepared per connection.
    const url = svc.testDb.url;
    const one: Db = url ? await openPostgres(url, 1, () => undefined) : svc.service.deps.db;
    try {
      // A queue that drained: runs done, statistics that say none is pending.
      await pending(one, 200);
      await one.query(`UPDATE runs SET status = 'completed', completed_at = now()`);
      await one.query('ANALYZE runs');
      // The first claims prepare the pick and the claim on those statistics.
      await pending(one, 1);
      assert.equal((await claimRuns(one, options)).runs.length, 1);
      // Then a backlog.
      await pending(one, 2_000);
      const prepared = await one.query<{ name: string; statement: string }>(
        `SELECT name, statement FROM pg_prepared_statements WHERE statement LIKE '%svc.claim_picked%'`,
      );
      const pick = prepared.find((p) => p.statement.includes("set_config('svc.claim_picked'"))?.name;
      const claim = prepared.find((p) => p.statement.includes('UPDATE runs'))?.name;
      assert.ok(pick && claim, 'the claim prepared its statements');
      await one
        .transaction(async (tx) => {
          // As a batch runs them: generic plans, no sequential scans (Db.batch).
          await tx.query(
            "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)",
          );
          const args = quote(JSON.stringify(options));
          // The pick keeps what it picked for the claim (a setting of the transaction).
          const pickPlan = await explainAnalyze(tx, `EXECUTE ${pick}(${args})`);
          const claimPlan = await explainAnalyze(tx, `EXECUTE ${claim}(${args})`);
          // 8 runs taken, from 4 organizations: a few index entries per organization and per run,
          // whatever the backlog (2,000 pending, 200 completed).
          const pickRead = rowsRead(pickPlan, 'runs');
          const claimRead = rowsRead(claimPlan, 'runs');
          assert.ok(pickRead <= 100, `the pick read ${pickRead} runs`);
          assert.ok(claimRead <= 100, `the claim read ${claimRead} runs`);
          assert.ok(claimRead >= 8, `the claim read ${claimRead} runs: it took 8`);
          throw new RolledBack();
        })
        .catch((err: unknown) => {
          if (!(err instanceof RolledBack)) throw err;
        });
    } finally {
      if (one !== svc.service.deps.db) await one.close();
    }
  } finally {
    await svc.close();
  }
});

class RolledBack extends Error {}
