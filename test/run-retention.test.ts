// Run retention (SVC_RUN_RETENTION_DAYS): ended runs older than the retention go with their
// deliveries; runs still in flight or delivering stay, and usage and the statistics never drop.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { pruneRuns } from '../src/db/sql/run-retention.ts';
import { pruneExpiredRuns } from '../src/domain/run-retention.ts';
import { backendName, TEST_DATABASE_URL } from './helpers/db.ts';
import { addRun, insertTask, useTestService } from './helpers/fixtures.ts';

const DAY_MS = 86_400_000;
const RETENTION_DAYS = 90;

describe(`run retention (${backendName})`, () => {
  const fx = useTestService({ orgs: ['paid', 'free'] });
  const daysAgo = (days: number) => new Date(Date.now() - days * DAY_MS);
  const stats = async (organizationId: string, apiKey: string) => {
    const res = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/stats?organizationId=${organizationId}`,
      key: apiKey,
    });
    assert.equal(res.status, 200);
    return res.body;
  };
  const runExists = async (id: string) =>
    (await fx.db.query('SELECT 1 FROM runs WHERE id = $1', [id])).length === 1;

  async function addDelivery(organizationId: string, runId: string, status: 'pending' | 'delivered') {
    const id = randomUUID();
    await fx.db.query(
      `INSERT INTO deliveries (id, organization_id, run_id, channel, target, position, status, attempts,
         round_attempts, created_at, updated_at)
       VALUES ($1, $2, $3, 'webhook', 'https://hooks.example.com/x', 0, $4, 1, 1, now(), now())`,
      [id, organizationId, runId, status],
    );
    await fx.db.query(
      `INSERT INTO delivery_attempts (delivery_id, attempt, started_at, duration_ms, outcome, status_code)
       VALUES ($1, 1, now(), 12, $2, $3)`,
      [id, status === 'delivered' ? 'delivered' : 'failed', status === 'delivered' ? 200 : 500],
    );
    await fx.db.query('UPDATE runs SET delivery_status = $2 WHERE id = $1', [runId, status]);
    return id;
  }

  test('ended runs past the retention go with their deliveries; runs in flight, delivering or recent stay, and usage and the statistics keep them', async () => {
    const { organizationId, apiKey } = fx.org;
    const task = await insertTask(fx.db, organizationId);
    const ended = (status: 'completed' | 'failed') => ({ status, costCents: 3, tokensUsed: 100 });
    const oldCompleted = await addRun(fx.db, organizationId, task, ended('completed'), daysAgo(100));
    const oldDelivered = await addRun(fx.db, organizationId, task, ended('completed'), daysAgo(95));
    const delivery = await addDelivery(organizationId, oldDelivered, 'delivered');
    const oldFailed = await addRun(fx.db, organizationId, task, ended('failed'), daysAgo(91));
    const oldDelivering = await addRun(fx.db, organizationId, task, ended('completed'), daysAgo(120));
    await addDelivery(organizationId, oldDelivering, 'pending');
    const oldRunning = await addRun(
      fx.db,
      organizationId,
      task,
      { status: 'running', costCents: 1, tokensUsed: 10 },
      daysAgo(200),
    );
    const oldPending = await addRun(fx.db, organizationId, task, undefined, daysAgo(150));
    const recent = await addRun(fx.db, organizationId, task, ended('completed'), daysAgo(89));
    const before = await stats(organizationId, apiKey);

    assert.equal(await pruneExpiredRuns(fx.db, null, RETENTION_DAYS), 3);

    for (const gone of [oldCompleted, oldDelivered, oldFailed]) assert.equal(await runExists(gone), false);
    for (const kept of [oldDelivering, oldRunning, oldPending, recent])
      assert.equal(await runExists(kept), true);
    const [left] = await fx.db.query<{ deliveries: number; attempts: number }>(
      `SELECT (SELECT count(*)::int FROM deliveries WHERE id = $1) AS deliveries,
              (SELECT count(*)::int FROM delivery_attempts WHERE delivery_id = $1) AS attempts`,
      [delivery],
    );
    assert.deepEqual(left, { deliveries: 0, attempts: 0 });
    const res = await fx.svc.call({ method: 'GET', url: `/api/svc/runs/${oldCompleted}`, key: apiKey });
    assert.equal(res.status, 404);
    // The ledger keeps every run: usage, billing and the statistics do not drop.
    assert.deepEqual(await stats(organizationId, apiKey), before);
    const [ledger] = await fx.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM usage_ledger WHERE run_id = ANY($1::uuid[])',
      [[oldCompleted, oldDelivered, oldFailed]],
    );
    assert.equal(ledger?.n, 3);
    // Nothing more to do.
    assert.equal(await pruneExpiredRuns(fx.db, null, RETENTION_DAYS), 0);
  });

  test('one statement deletes at most its batch, across organizations, and the next takes the rest', async () => {
    const runs: string[] = [];
    for (const o of [fx.org, fx.other]) {
      const task = await insertTask(fx.db, o.organizationId);
      for (let i = 0; i < 3; i++) {
        runs.push(
          await addRun(
            fx.db,
            o.organizationId,
            task,
            { status: 'completed', costCents: 0, tokensUsed: 0 },
            daysAgo(400),
          ),
        );
      }
    }
    assert.equal(await pruneRuns(fx.db, null, RETENTION_DAYS, 4), 4);
    assert.equal(await pruneRuns(fx.db, null, RETENTION_DAYS, 4), 2);
    assert.equal(await pruneRuns(fx.db, null, RETENTION_DAYS, 4), 0);
    for (const id of runs) assert.equal(await runExists(id), false);
  });

  test("the retention counts from the given time (a test clock's, or the database's now)", async () => {
    const task = await insertTask(fx.db, fx.org.organizationId);
    const run = await addRun(
      fx.db,
      fx.org.organizationId,
      task,
      { status: 'completed', costCents: 0, tokensUsed: 0 },
      daysAgo(10),
    );
    // 89 days after its creation, then 91 (other tests' runs may go too: only this one is checked).
    await pruneRuns(fx.db, daysAgo(-79), RETENTION_DAYS);
    assert.equal(await runExists(run), true);
    await pruneRuns(fx.db, daysAgo(-81), RETENTION_DAYS);
    assert.equal(await runExists(run), false);
  });

  test('a run another transaction holds is passed over, not waited for (api processes prune at once)', {
    skip: !TEST_DATABASE_URL && 'two transactions at once need PostgreSQL',
  }, async () => {
    const task = await insertTask(fx.db, fx.org.organizationId);
    const ended = { status: 'completed', costCents: 0, tokensUsed: 0 } as const;
    const held = await addRun(fx.db, fx.org.organizationId, task, ended, daysAgo(300));
    const free = await addRun(fx.db, fx.org.organizationId, task, ended, daysAgo(301));
    await fx.svc.testDb.db.transaction(async (tx) => {
      await tx.query('SELECT 1 FROM runs WHERE id = $1 FOR UPDATE', [held]);
      // On another connection of the pool, while the row is held: waiting for it would last
      // until this transaction ends, so a prune still going after 5 s fails the test.
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the prune waited for the held run')), 5000);
      });
      try {
        await Promise.race([pruneRuns(fx.db, null, RETENTION_DAYS), waited]);
      } finally {
        clearTimeout(timer);
      }
    });
    assert.equal(await runExists(free), false);
    assert.equal(await runExists(held), true);
    await pruneRuns(fx.db, null, RETENTION_DAYS);
    assert.equal(await runExists(held), false);
  });
});
