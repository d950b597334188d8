// The worker's writes about its runs (a model call's usage, a run's end) committed several per
// transaction (worker/run-writes.ts): each write has the effects it has alone.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { RunResultRow } from '../src/db/sql/run-queue.ts';
import { insertRun, type RunRow } from '../src/db/sql/runs.ts';
import { RunWriteBatcher } from '../src/worker/run-writes.ts';
import { backendName } from './helpers/db.ts';
import { newTask, type Org, unlimited } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';

const WORKER = 'worker-under-test';

const completed = (output: string): RunResultRow => ({
  status: 'completed',
  output,
  error: null,
  completedAt: null,
});
const failed = (error: string): RunResultRow => ({
  status: 'failed',
  output: null,
  error,
  completedAt: null,
});

describe(`run writes committed together (${backendName})`, () => {
  let svc: TestService;
  let org: Org;
  before(async () => {
    svc = await startTestService();
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc.close();
  });

  const db = () => svc.service.deps.db;
  /** One transaction at a time: a write sent while one is in flight joins the next batch. */
  const batcher = () => new RunWriteBatcher(db(), 10, 1);

  /** A run of the task, running under `owner`'s lease as a claim leaves it. */
  const runningRun = async (taskId: string, owner = WORKER): Promise<RunRow> => {
    const now = new Date();
    const run = await insertRun(db(), {
      id: randomUUID(),
      organizationId: org.organizationId,
      taskId,
      slotAt: null,
      trigger: 'manual',
      now,
    });
    const [held] = await db().query<RunRow>(
      `UPDATE runs SET status = 'running', started_at = $2, attempts = 1, lease_owner = $3,
              lease_expires_at = $2::timestamptz + interval '10 minutes'
        WHERE id = $1 RETURNING *`,
      [run.id, now, owner],
    );
    assert.ok(held);
    return held;
  };

  const usage = (run: RunRow, tokensUsed: number, costCents: number, id: string = randomUUID()) => ({
    id,
    runId: run.id,
    providerCallId: `call-${id}`,
    tokensUsed,
    costCents,
  });

  /** The transaction that last wrote each run's row. */
  const writers = async (runs: RunRow[]) => {
    const rows = await db().query<{ xid: string }>(
      'SELECT xmin::text AS xid FROM runs WHERE id = ANY($1::uuid[])',
      [runs.map((r) => r.id)],
    );
    return new Set(rows.map((r) => r.xid));
  };

  /** What the writes left on the tasks, runs, ledger and deliveries, without ids or times. */
  const outcome = async (taskIds: string[], runs: RunRow[]) => {
    const ids = runs.map((r) => r.id);
    const tasks = await db().query(
      `SELECT t.status, t.consecutive_failures, t.paused_reason IS NOT NULL AS paused,
              t.last_delivered_run_id IS NOT NULL AS delivered_one,
              (SELECT count(*)::int FROM deliveries d WHERE d.task_id = t.id AND d.kind = 'task.paused') AS notices
         FROM tasks t JOIN unnest($1::text[]) WITH ORDINALITY AS o(id, n) ON t.id = o.id::uuid ORDER BY o.n`,
      [taskIds],
    );
    const perRun = await db().query(
      `SELECT r.status, r.delivery_status, r.cost_cents, r.tokens_used, r.lease_owner, u.status AS ledger,
              u.cost_cents AS ledger_cost, u.tokens_used AS ledger_tokens,
              (SELECT count(*)::int FROM usage_calls c WHERE c.run_id = r.id) AS calls,
              (SELECT string_agg(d.status, ',' ORDER BY d.status) FROM deliveries d WHERE d.run_id = r.id) AS deliveries
         FROM runs r JOIN usage_ledger u ON u.run_id = r.id
         JOIN unnest($1::text[]) WITH ORDINALITY AS o(id, n) ON r.id = o.id::uuid ORDER BY o.n`,
      [ids],
    );
    return { tasks, runs: perRun };
  };

  /**
   * Two runs of a task that pauses after 2 failures, two runs of a deliverOn change task with the
   * same output, a run of a task without destination, and the usage of a run still going: all
   * written either in one batch or one after the other.
   */
  const scenario = async (together: boolean) => {
    const email = [{ type: 'email', value: 'ops@example.com' }];
    const pausing = await newTask(svc, org, { autoPauseAfterFailures: 2, destinations: email });
    const change = await newTask(svc, org, { deliverOn: 'change', destinations: email });
    const plain = await newTask(svc, org);
    // Two tasks paused by one failure each: in one batch, their ends are one statement.
    const pausingNow = [
      await newTask(svc, org, { autoPauseAfterFailures: 1, destinations: email }),
      await newTask(svc, org, { autoPauseAfterFailures: 1, destinations: email }),
    ];
    const runs = [
      await runningRun(pausing.id),
      await runningRun(pausing.id),
      await runningRun(change.id),
      await runningRun(change.id),
      await runningRun(plain.id),
      await runningRun(plain.id),
      ...(await Promise.all(pausingNow.map((t) => runningRun(t.id)))),
    ];
    const [p1, p2, c1, c2, n1, going, q1, q2] = runs as [
      RunRow,
      RunRow,
      RunRow,
      RunRow,
      RunRow,
      RunRow,
      RunRow,
      RunRow,
    ];
    const w = batcher();
    const writes = [
      () => w.recordUsage(usage(going, 120, 0.25)),
      // Some ends carry their runs' last calls (written by the ends' statements).
      () => w.recordEnd(p1, WORKER, failed('The provider refused'), [usage(p1, 5, 0.05)]),
      () => w.recordEnd(c1, WORKER, completed('The same answer')),
      () => w.recordEnd(n1, WORKER, completed('Done'), [usage(n1, 30, 0.3), usage(n1, 12, 0.12)]),
      () => w.recordEnd(p2, WORKER, failed('The provider refused again'), [usage(p2, 9, 0.09)]),
      () => w.recordEnd(c2, WORKER, completed('The  same answer ')),
      () => w.recordEnd(q1, WORKER, failed('The provider refused')),
      () => w.recordEnd(q2, WORKER, failed('The provider refused')),
    ];
    if (together) {
      // The first transaction takes the usage of another run; every write sent meanwhile joins
      // the second.
      const other = await runningRun(plain.id);
      const first = w.recordUsage(usage(other, 1, 0.01));
      await Promise.all([first, ...writes.map((write) => write())]);
      assert.equal((await writers(runs)).size, 1, 'the writes were committed by one transaction');
    } else {
      for (const write of writes) await write();
      assert.equal((await writers(runs)).size, runs.length);
    }
    return outcome([pausing.id, change.id, plain.id, ...pausingNow.map((t) => t.id)], runs);
  };

  test('the ends of runs of the same task and of different tasks, with usage, recorded in one transaction leave what they leave one by one', async () => {
    const alone = await scenario(false);
    const together = await scenario(true);
    // Runs of one task may be recorded in either order (the batch takes them in id order).
    const comparable = (o: typeof alone) => ({
      tasks: o.tasks,
      runs: o.runs.map((r) => JSON.stringify(r)).sort(),
    });
    assert.deepEqual(comparable(together), comparable(alone));
    // What that is: the pause and its one notice, one delivery of the unchanged output.
    assert.deepEqual(alone.tasks, [
      { status: 'paused', consecutive_failures: 2, paused: true, delivered_one: false, notices: 1 },
      { status: 'active', consecutive_failures: 0, paused: false, delivered_one: true, notices: 0 },
      { status: 'active', consecutive_failures: 0, paused: false, delivered_one: false, notices: 0 },
      { status: 'paused', consecutive_failures: 1, paused: true, delivered_one: false, notices: 1 },
      { status: 'paused', consecutive_failures: 1, paused: true, delivered_one: false, notices: 1 },
    ]);
    // The organization's count of active tasks followed every pause.
    const [count] = await db().query<{ counted: number; active: number }>(
      `SELECT o.active_tasks AS counted,
              (SELECT count(*)::int FROM tasks t WHERE t.organization_id = o.id AND t.status = 'active') AS active
         FROM organizations o WHERE o.id = $1`,
      [org.organizationId],
    );
    assert.equal(count?.counted, count?.active);
    // The calls carried to the ends are on their runs and ledger rows, once.
    assert.deepEqual(
      [0, 1, 4].map((i) => {
        const r = alone.runs[i];
        return [r?.ledger, r?.ledger_tokens, r?.tokens_used, Number(r?.cost_cents), r?.calls];
      }),
      [
        ['failed', 5, 5, 0.05, 1],
        ['failed', 9, 9, 0.09, 1],
        ['completed', 42, 42, 0.42, 2],
      ],
    );
    const changeDeliveries = alone.runs.slice(2, 4).map((r) => r.deliveries);
    assert.deepEqual(changeDeliveries.sort(), ['pending', 'suppressed']);
    assert.deepEqual(alone.runs[5], {
      status: 'running',
      delivery_status: null,
      cost_cents: 0.25,
      tokens_used: 120,
      lease_owner: WORKER,
      ledger: 'pending',
      ledger_cost: 0.25,
      ledger_tokens: 120,
      calls: 1,
      deliveries: null,
    });
  });

  test('a run whose lease was lost is not recorded, and the other runs of its batch are', async () => {
    const task = await newTask(svc, org);
    const lost = await runningRun(task.id, 'another-worker');
    const mine = [await runningRun(task.id), await runningRun((await newTask(svc, org)).id)];
    const w = batcher();
    const first = w.recordUsage(usage(lost, 10, 0.1));
    const ended = await Promise.all([
      w.recordEnd(lost, WORKER, completed('Mine')),
      ...mine.map((run) => w.recordEnd(run, WORKER, completed('Mine'))),
    ]);
    await first;
    assert.equal(ended[0], undefined);
    assert.deepEqual(
      ended.slice(1).map((r) => r?.status),
      ['completed', 'completed'],
    );
    const left = await outcome([], [lost, ...mine]);
    assert.deepEqual(
      left.runs.map((r) => [r.status, r.lease_owner, r.ledger]),
      [
        ['running', 'another-worker', 'pending'],
        ['completed', null, 'completed'],
        ['completed', null, 'completed'],
      ],
    );
    // The usage of the run this worker lost stays on its ledger (the provider charged for it).
    assert.equal(left.runs[0]?.ledger_tokens, 10);
    assert.equal((await writers(mine)).size, 1);
  });

  test("an end carrying its run's last calls writes them whether or not the end applies, and the run's figures with them", async () => {
    const task = await newTask(svc, org);
    const [mine, lost] = [await runningRun(task.id), await runningRun(task.id, 'another-worker')];
    const canceled = await runningRun((await newTask(svc, org)).id);
    await db().query(`UPDATE runs SET status = 'failed', canceled_at = now() WHERE id = $1`, [canceled.id]);
    const w = batcher();
    const first = w.recordUsage(usage(mine, 40, 0.4));
    const retried = usage(mine, 60, 0.6);
    const ended = await Promise.all([
      w.recordEnd(mine, WORKER, completed('Mine'), [retried]),
      w.recordEnd(lost, WORKER, completed('Not mine'), [usage(lost, 11, 0.11)]),
      w.recordEnd(canceled, WORKER, completed('Too late'), [usage(canceled, 7, 0.07)]),
    ]);
    await first;
    // Sent again (as after an unreachable database): counted once.
    assert.equal(await w.recordEnd(mine, WORKER, completed('Mine'), [retried]), undefined);
    assert.deepEqual(
      ended.map((r) => [r?.status, r?.tokens_used, Number(r?.cost_cents ?? Number.NaN)]),
      [
        ['completed', 100, 1],
        [undefined, undefined, Number.NaN],
        [undefined, undefined, Number.NaN],
      ],
    );
    const rows = (await outcome([], [mine, lost, canceled])).runs;
    assert.deepEqual(
      rows.map((r) => [r.status, r.ledger, r.ledger_tokens, r.tokens_used, r.cost_cents, r.calls]),
      [
        ['completed', 'completed', 100, 100, 1, 2],
        // The other worker's run and the canceled one keep the calls, on the ledger and on the run.
        ['running', 'pending', 11, 11, 0.11, 1],
        ['failed', 'pending', 7, 7, 0.07, 1],
      ],
    );
  });

  test('ends whose outputs pass 1,000,000 characters together are not sent in one batch', async () => {
    const task = await newTask(svc, org);
    const other = await newTask(svc, org);
    const [first, a, b] = [await runningRun(task.id), await runningRun(other.id), await runningRun(other.id)];
    const w = batcher();
    const big = 'x'.repeat(600_000);
    // The first end is in flight; the two large ones queue behind it, and only one fits a batch.
    const ended = await Promise.all([
      w.recordEnd(first, WORKER, completed('Small')),
      w.recordEnd(a, WORKER, completed(big)),
      w.recordEnd(b, WORKER, completed(big)),
    ]);
    assert.deepEqual(
      ended.map((r) => r?.status),
      ['completed', 'completed', 'completed'],
    );
    assert.equal((await writers([first, a, b])).size, 3);
    const [row] = await db().query<{ n: number }>('SELECT length(output)::int AS n FROM runs WHERE id = $1', [
      b.id,
    ]);
    assert.equal(row?.n, 600_000);
  });

  test('a model call written twice under one id counts once', async () => {
    const run = await runningRun((await newTask(svc, org)).id);
    const w = batcher();
    const call = usage(run, 300, 1.5);
    await Promise.all([w.recordUsage(usage(run, 1, 0.01)), w.recordUsage(call)]);
    await w.recordUsage(call);
    await w.recordUsage(usage(run, 200, 0.5));
    const [row] = (await outcome([], [run])).runs;
    assert.deepEqual(
      [row?.ledger_tokens, row?.ledger_cost, row?.tokens_used, row?.cost_cents, row?.calls],
      [501, 2.01, 501, 2.01, 3],
    );
  });

  test('a write the database refuses fails alone, and the others of its batch are recorded', async () => {
    const task = await newTask(svc, org);
    const [a, b, c] = [await runningRun(task.id), await runningRun(task.id), await runningRun(task.id)];
    const w = batcher();
    const first = w.recordUsage(usage(a, 5, 0.05));
    const refused = w.recordUsage(usage(b, -1, 0)); // tokens_used >= 0
    const others = [w.recordUsage(usage(b, 7, 0.07)), w.recordEnd(c, WORKER, completed('Fine'))];
    await first;
    await assert.rejects(refused);
    const [, ended] = await Promise.all(others);
    assert.equal((ended as RunRow | undefined)?.status, 'completed');
    const rows = (await outcome([], [a, b, c])).runs;
    assert.deepEqual(
      rows.map((r) => [r.status, r.ledger_tokens, r.calls]),
      [
        ['running', 5, 1],
        ['running', 7, 1],
        ['completed', 0, 0],
      ],
    );
  });
});
