import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Queryable } from '../src/db/db.ts';
import { type ClaimOptions, claimRuns } from '../src/db/sql/run-claim.ts';
import { insertRun } from '../src/db/sql/runs.ts';
import { newId } from '../src/lib/ids.ts';
import { backendName } from './helpers/db.ts';
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

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** Rows of `relation` a plan read (returned or filtered out), over all its loops. */
function rowsRead(node: PlanNode, relation: string): number {
  const own =
    node['Relation Name'] === relation
      ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']
      : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + rowsRead(child, relation), 0);
}

async function explainAnalyze(tx: Queryable, statement: string): Promise<PlanNode> {
  const [row] = await tx.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`);
  const value = row?.['QUERY PLAN'];
  const plan = (typeof value === 'string' ? JSON.parse(value) : value) as [{ Plan: PlanNode }];
  return plan[0].Plan;
}

const quote = (s: string) => `'${s.replaceAll("'", "''")}'`;

test(`a claim reads no more pending runs than it takes, on plans made while no run was pending (${backendName})`, async () => {
  const svc = await startTestService();
  try {
    const { db } = svc.service.deps;
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
    // One connection throughout (a transaction), rolled back at the end.
    await db
      .transaction(async (tx) => {
        // A queue that drained: runs done, statistics that say none is pending.
        await pending(tx, 200);
        await tx.query(`UPDATE runs SET status = 'completed', completed_at = now()`);
        await tx.query('ANALYZE runs');
        // The first claims prepare the pick and the claim on those statistics.
        await pending(tx, 1);
        assert.equal((await claimRuns(tx, options)).runs.length, 1);
        // Then a backlog.
        await pending(tx, 2_000);
        // As svc_lock_then_query runs them: its settings (generic plans, and what else it sets).
        const [fn] = await tx.query<{ config: string[] | null }>(
          `SELECT proconfig AS config FROM pg_proc WHERE proname = 'svc_lock_then_query'`,
        );
        for (const setting of fn?.config ?? []) {
          const [name, value] = setting.split('=') as [string, string];
          await tx.query('SELECT set_config($1, $2, true)', [name, value]);
        }
        const names = await tx.query<{ name: string }>(
          `SELECT name FROM pg_prepared_statements WHERE name LIKE 'svc_pick_%' OR name LIKE 'svc_query_%' ORDER BY name`,
        );
        const pick = names.find((n) => n.name.startsWith('svc_pick_'))?.name;
        const claim = names.find((n) => n.name.startsWith('svc_query_'))?.name;
        assert.ok(pick && claim, 'the claim prepared its two statements');
        const args = quote(JSON.stringify(options));
        const pickPlan = await explainAnalyze(tx, `EXECUTE ${pick}(${args})`);
        const [picked] = await tx.query<Record<string, unknown>>(`EXECUTE ${pick}(${args})`);
        const claimPlan = await explainAnalyze(
          tx,
          `EXECUTE ${claim}(${args}, ${quote(JSON.stringify(Object.values(picked ?? {})[0]))})`,
        );
        // 8 runs taken, from 4 organizations: a few index entries per organization and per run,
        // whatever the backlog (2,000 pending, 200 completed).
        const pickRead = rowsRead(pickPlan, 'runs');
        const claimRead = rowsRead(claimPlan, 'runs');
        assert.ok(pickRead <= 100, `the pick read ${pickRead} runs`);
        assert.ok(claimRead <= 100, `the claim read ${claimRead} runs`);
        throw new RolledBack();
      })
      .catch((err: unknown) => {
        if (!(err instanceof RolledBack)) throw err;
      });
  } finally {
    await svc.close();
  }
});

class RolledBack extends Error {}
