import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { backendName } from '../helpers/db.ts';
import type { ModelServer } from '../helpers/model-server.ts';
import { newTask, type Org, runNow, startWorkerService, unlimited } from '../helpers/runs.ts';
import type { TestService } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';

/**
 * The lost wake-up: a run that ends frees its organization's place under SVC_ORG_CONCURRENCY,
 * but if the worker looks for the next run before the result is committed, it sees the place
 * still taken, and nothing looks again until the lease-period poll. The poll is set to 30 s
 * here, so a lost wake-up shows as a gap of about 30 s between run starts. The bounds below are
 * correctness bounds against that poll, not speed figures: without a lost wake-up, 20 runs of
 * 50 ms two at a time take about a second.
 */

const POLL_SECONDS = 30;
const RUNS = 20;
const WAVES = 3;
const ORG_CONCURRENCY = 2;
/** Far below the poll interval: a gap this long means a run waited for the poll. */
const MAX_GAP_MS = 5_000;
/** How long recording a result takes (see the trigger below). */
const COMMIT_DELAY_MS = 100;

describe(`no run waits for a poll (${backendName})`, () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;
  before(async () => {
    ({ svc, model } = await startWorkerService(() => ({ delayMs: 50 }), {
      SVC_RUN_LEASE_SECONDS: String(POLL_SECONDS),
      SVC_ORG_CONCURRENCY: String(ORG_CONCURRENCY),
      SVC_WORKER_CONCURRENCY: '8',
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
    // A result that takes a while to commit (a busy disk, a large ledger update), installed in
    // this test's own database: it opens the window in which the worker looks for the next run
    // before the finished one has left 'running', the order the lost wake-up needs.
    await svc.service.deps.db.exec(`
      CREATE FUNCTION test_slow_finish() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_sleep(${COMMIT_DELAY_MS / 1000}); RETURN NEW; END $$;
      CREATE TRIGGER test_slow_finish BEFORE UPDATE OF status ON runs
        FOR EACH ROW WHEN (NEW.status IN ('completed', 'failed')) EXECUTE FUNCTION test_slow_finish();`);
  });
  after(async () => {
    await svc.close();
    await model.close();
  });

  test('many short runs of one organization at its concurrency limit start back to back, with no gap near the poll interval', async (t) => {
    const tasks = [];
    for (let i = 0; i < RUNS; i++) tasks.push(await newTask(svc, org));
    for (let wave = 1; wave <= WAVES; wave++) {
      const ids: string[] = [];
      for (const task of tasks) ids.push(await runNow(svc, org, task.id));
      // Well under the poll interval: with a lost wake-up the wave is still waiting here.
      const runs = await waitFor(
        `wave ${wave}: all ${RUNS} runs finished within ${(2 * MAX_GAP_MS) / 1000} s (the poll is every ${POLL_SECONDS} s)`,
        async () => {
          const found = await Promise.all(
            ids.map(
              async (id) =>
                (await svc.call({ method: 'GET', url: `/api/svc/runs/${id}`, key: org.apiKey })).body,
            ),
          );
          return found.every((r) => r.status === 'completed' || r.status === 'failed') ? found : undefined;
        },
        { timeoutMs: 2 * MAX_GAP_MS, everyMs: 100 },
      );
      assert.ok(
        runs.every((r) => r.status === 'completed'),
        JSON.stringify(runs.map((r) => r.error)),
      );
      const starts = runs.map((r) => Date.parse(r.startedAt)).sort((a, b) => a - b);
      const gaps = starts.slice(1).map((t, i) => t - (starts[i] as number));
      const largest = Math.max(...gaps);
      t.diagnostic(`wave ${wave}: largest gap between run starts ${largest} ms`);
      assert.ok(largest < MAX_GAP_MS, `wave ${wave}: largest gap between run starts ${largest} ms`);
    }
  });
});

/**
 * A lease long enough that neither a heartbeat (every third of it) nor the poll (once per lease)
 * comes while the test runs: a run that waited for either would start far outside the bound.
 */
const LONG_LEASE_SECONDS = 180;

describe(`a place freed by a deletion is taken at once (${backendName})`, () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;
  before(async () => {
    ({ svc, model } = await startWorkerService(
      (prompt) => (prompt.startsWith('hang') ? { hang: true } : {}),
      {
        SVC_RUN_LEASE_SECONDS: String(LONG_LEASE_SECONDS),
        SVC_ORG_CONCURRENCY: String(ORG_CONCURRENCY),
        SVC_SHUTDOWN_GRACE_SECONDS: '1',
      },
    ));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc.close();
    await model.close();
  });

  test('deleting a task whose run is running lets a waiting run of the organization start without waiting for a heartbeat or the poll', async () => {
    const { db } = svc.service.deps;
    const hanging = [
      await newTask(svc, org, { prompt: 'hang 1' }),
      await newTask(svc, org, { prompt: 'hang 2' }),
    ];
    const hangingRuns: string[] = [];
    for (const task of hanging) hangingRuns.push(await runNow(svc, org, task.id));
    const leaseOf = async (runId: string) =>
      (
        await db.query<{ status: string; lease: Date | null }>(
          'SELECT status, lease_expires_at AS lease FROM runs WHERE id = $1',
          [runId],
        )
      )[0];
    const secondLease = await waitFor('both hanging runs to be running', async () => {
      const leases = await Promise.all(hangingRuns.map(leaseOf));
      return leases.every((l) => l?.status === 'running') ? leases[1]?.lease : undefined;
    });
    const waiting = await newTask(svc, org);
    const waitingRun = await runNow(svc, org, waiting.id);
    assert.equal((await leaseOf(waitingRun))?.status, 'pending', 'the organization is at its limit');
    const deletedAt = Date.now();
    const del = await svc.call({
      method: 'DELETE',
      url: `/api/svc/tasks/${hanging[0]?.id}`,
      key: org.apiKey,
    });
    assert.equal(del.status, 204, del.raw);
    await waitFor(
      `the waiting run to start within ${MAX_GAP_MS / 1000} s of the deletion`,
      async () => ((await leaseOf(waitingRun))?.status !== 'pending' ? true : undefined),
      { timeoutMs: MAX_GAP_MS },
    );
    assert.ok(Date.now() - deletedAt < MAX_GAP_MS);
    // No heartbeat came meanwhile (the other run's lease was not renewed): the start owed
    // nothing to one.
    assert.equal((await leaseOf(hangingRuns[1] as string))?.lease?.getTime(), secondLease?.getTime());
    await svc.call({ method: 'DELETE', url: `/api/svc/tasks/${hanging[1]?.id}`, key: org.apiKey });
  });
});
