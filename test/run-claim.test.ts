import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { claimRuns } from '../src/db/sql/run-claim.ts';
import { insertRun } from '../src/db/sql/runs.ts';
import { newId } from '../src/lib/ids.ts';
import type { RunExecutor } from '../src/runner/executor.ts';
import { RunWorker } from '../src/worker/worker.ts';
import { backendName, TEST_DATABASE_URL } from './helpers/db.ts';
import { newTask, type Org, unlimited } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * Claims made by several workers at the same instant: the per-organization limit
 * (SVC_ORG_CONCURRENCY) is exact across them and the fair order holds. A claim locks only the
 * organizations it claims for (db/sql/run-claim.ts), so workers claiming for different
 * organizations do not wait for each other and two claiming for one organization do. On
 * PostgreSQL the workers' statements really run at once (each claim is one statement on a
 * pooled connection); the embedded database runs them one after the other.
 */

/** Executions in this process, per organization: how many at once, at most. */
class Concurrency {
  readonly running = new Map<string, number>();
  readonly peak = new Map<string, number>();
  readonly order: string[] = [];
  enter(org: string) {
    const n = (this.running.get(org) ?? 0) + 1;
    this.running.set(org, n);
    this.peak.set(org, Math.max(this.peak.get(org) ?? 0, n));
    this.order.push(org);
  }
  leave(org: string) {
    this.running.set(org, (this.running.get(org) ?? 1) - 1);
  }
}

/** An executor that records concurrency and answers after `hold` resolves. */
function recordingExecutor(c: Concurrency, hold: () => Promise<void>): RunExecutor {
  return {
    async execute({ run }) {
      c.enter(run.organization_id);
      try {
        await hold();
      } finally {
        c.leave(run.organization_id);
      }
      return { ok: true, output: 'done', tokensUsed: 0, costCents: 0 };
    },
  };
}

async function pendingRuns(svc: TestService, org: Org, taskId: string, count: number): Promise<void> {
  const { db } = svc.service.deps;
  for (let i = 0; i < count; i++) {
    await insertRun(db, {
      id: newId(),
      organizationId: org.organizationId,
      taskId,
      slotAt: null,
      trigger: 'manual',
      now: new Date(Date.now() + i),
    });
  }
}

/**
 * Claims that take a while (a trigger that sleeps as each run is set running, installed in the
 * test's own database): the window in which two claims overlap, where a claim that counted an
 * organization's running runs before another claim committed would exceed its limit.
 */
async function slowClaims(svc: TestService): Promise<void> {
  await svc.service.deps.db.exec(`
    CREATE FUNCTION test_slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_sleep(0.02); RETURN NEW; END $$;
    CREATE TRIGGER test_slow_claim BEFORE UPDATE OF status ON runs
      FOR EACH ROW WHEN (NEW.status = 'running') EXECUTE FUNCTION test_slow_claim();`);
}

/** Waits until no run is pending or running. */
async function everyRunEnded(db: TestService['service']['deps']['db']): Promise<void> {
  await waitFor(
    'every run to finish',
    async () => {
      const [row] = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM runs WHERE status IN ('pending', 'running')",
      );
      return row?.n === 0 ? true : undefined;
    },
    { timeoutMs: 60_000, everyMs: 50 },
  );
}

/**
 * The database's own record: at the start of every run, the runs of its organization started
 * before it and not yet ended (itself included) are within `limit`; and every one of the
 * `count` runs completed at its first attempt.
 */
async function assertLimitHeldAndEachRunOnce(
  db: TestService['service']['deps']['db'],
  limit: number,
  count: number,
): Promise<void> {
  const over = await db.query<{ id: string; n: number }>(
    `SELECT r.id, (SELECT count(*)::int FROM runs o
                    WHERE o.organization_id = r.organization_id
                      AND o.started_at <= r.started_at AND o.completed_at > r.started_at) AS n
       FROM runs r`,
  );
  assert.deepEqual(
    over.filter((r) => r.n > limit),
    [],
  );
  const runs = await db.query<{ status: string; attempts: number }>('SELECT status, attempts FROM runs');
  assert.equal(runs.length, count);
  assert.ok(
    runs.every((r) => r.status === 'completed' && r.attempts === 1),
    JSON.stringify(runs),
  );
}

/** `n` workers on the service's Deps, each executing with `recordingExecutor` (10 to 50 ms a run). */
function recordingWorkers(svc: TestService, c: Concurrency, n: number): RunWorker[] {
  return Array.from(
    { length: n },
    () =>
      new RunWorker(
        svc.service.deps,
        recordingExecutor(c, () => sleep(10 + Math.random() * 40)),
      ),
  );
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe(`claims by several workers at once (${backendName})`, () => {
  test('four workers claiming at once never give an organization more than its limit, and every run is executed once', async () => {
    const ORG_LIMIT = 2;
    const svc = await startTestService({
      env: {
        SVC_WORKER_CONCURRENCY: '3',
        SVC_ORG_CONCURRENCY: String(ORG_LIMIT),
        SVC_RUN_LEASE_SECONDS: '30',
      },
    });
    const c = new Concurrency();
    const workers = recordingWorkers(svc, c, 4);
    try {
      const orgs: Org[] = [];
      for (let o = 0; o < 5; o++) {
        const org = await svc.createOrg('paid');
        await unlimited(svc, org);
        const task = await newTask(svc, org);
        await pendingRuns(svc, org, task.id, 12);
        orgs.push(org);
      }
      await slowClaims(svc);
      await Promise.all(workers.map((w) => w.start()));
      const { db } = svc.service.deps;
      await everyRunEnded(db);
      for (const org of orgs) {
        assert.ok(
          (c.peak.get(org.organizationId) ?? 0) <= ORG_LIMIT,
          `at most ${ORG_LIMIT} runs of one organization at once: ${[...c.peak.values()].join(',')}`,
        );
      }
      await assertLimitHeldAndEachRunOnce(db, ORG_LIMIT, 60);
    } finally {
      await Promise.all(workers.map((w) => w.stop(1_000)));
      await svc.close();
    }
  });

  test('run nows claimed at their creation by a worker with free places keep every organization within its limit beside the claims of other workers', async () => {
    const ORG_LIMIT = 2;
    const svc = await startTestService({
      env: {
        SVC_WORKER_CONCURRENCY: '4',
        SVC_ORG_CONCURRENCY: String(ORG_LIMIT),
        SVC_RUN_LEASE_SECONDS: '30',
      },
    });
    const c = new Concurrency();
    const workers = recordingWorkers(svc, c, 3);
    // The last worker started takes the run nows' places (RunHandoff); count what it begins.
    const { runHandoff } = svc.service.deps;
    const reserve = runHandoff.reserve.bind(runHandoff);
    let begunAtCreation = 0;
    runHandoff.reserve = () => {
      const place = reserve();
      return (
        place && {
          ...place,
          begin: (claimed) => {
            begunAtCreation++;
            place.begin(claimed);
          },
        }
      );
    };
    try {
      const orgs: Org[] = [];
      const tasks: { org: Org; id: string }[] = [];
      for (let o = 0; o < 3; o++) {
        const org = await svc.createOrg('paid');
        await unlimited(svc, org);
        orgs.push(org);
        for (let t = 0; t < 6; t++) tasks.push({ org, id: (await newTask(svc, org)).id });
      }
      await slowClaims(svc);
      for (const w of workers) await w.start();
      const { db } = svc.service.deps;
      // A claim in flight holds its worker's free places until it is answered, and a run now
      // finds no place meanwhile: a wave of run nows that meets the last worker in the middle of
      // a claim (its poll's, on a busy machine) is claimed through the queue alone. The limits
      // are checked after every wave; waves go on until one was claimed at its creation.
      const WAVES = 4;
      let waves = 0;
      while (begunAtCreation === 0 && waves < WAVES) {
        waves++;
        // Wait until the last worker can take a place, as it can once idle.
        await waitFor('a free place for run nows', async () => {
          const place = reserve();
          place?.release();
          return place ? true : undefined;
        });
        const answers = await Promise.all(
          tasks.map((t) =>
            svc.call({ method: 'POST', url: `/api/svc/tasks/${t.id}/run`, key: t.org.apiKey }),
          ),
        );
        assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([202]));
        await everyRunEnded(db);
        for (const org of orgs)
          assert.ok((c.peak.get(org.organizationId) ?? 0) <= ORG_LIMIT, [...c.peak.values()].join(','));
        await assertLimitHeldAndEachRunOnce(db, ORG_LIMIT, tasks.length * waves);
      }
      assert.ok(begunAtCreation > 0, `some runs were claimed at their creation (in ${waves} waves)`);
      assert.ok(begunAtCreation < tasks.length * waves, 'and the others through the queue');
    } finally {
      await Promise.all(workers.map((w) => w.stop(1_000)));
      await svc.close();
    }
  });

  test('a claim that meets another one for the same organization counts the runs the other took', {
    skip: !TEST_DATABASE_URL && 'two claims at the same instant need PostgreSQL',
  }, async () => {
    // The order of a claim's candidates alone does not keep two claims apart: here a run older
    // than the ones the first claim is taking becomes pending while it takes them (as a run put
    // back by lease recovery does). The second claim must wait for the first and then count
    // its runs, not take the older run beside them.
    const svc = await startTestService({ env: { SVC_ORG_CONCURRENCY: '2' } });
    try {
      const { db } = svc.service.deps;
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      await pendingRuns(svc, org, task.id, 2);
      // Taking the two runs takes a while (a trigger that sleeps as each is set running).
      await db.exec(`
        CREATE FUNCTION test_slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep(0.5); RETURN NEW; END $$;
        CREATE TRIGGER test_slow_claim BEFORE UPDATE OF status ON runs
          FOR EACH ROW WHEN (NEW.status = 'running') EXECUTE FUNCTION test_slow_claim();`);
      const options = { now: null, leaseMs: 30_000, limit: 2, orgLimit: 2 };
      const first = claimRuns(db, { ...options, workerId: 'first' });
      await waitFor('the first claim taking its runs', async () => {
        const rows = await db.query(
          "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'",
        );
        return rows.length ? true : undefined;
      });
      await insertRun(db, {
        id: newId(),
        organizationId: org.organizationId,
        taskId: task.id,
        slotAt: null,
        trigger: 'manual',
        now: new Date(Date.now() - 3_600_000),
      });
      const second = await claimRuns(db, { ...options, workerId: 'second' });
      assert.equal((await first).runs.length, 2);
      assert.equal(second.runs.length, 0, 'the organization was at its limit');
      const [row] = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM runs WHERE status = 'running'",
      );
      assert.equal(row?.n, 2);
    } finally {
      await svc.close();
    }
  });

  test("workers claiming at once take an organization's first run before another organization's backlog", async () => {
    // A's six runs are older than B's one; three workers with one place each claim at the same
    // instant, A limited to 3. Ranked rank by rank, the places go to A, B, A: B's first run
    // comes before A's second, whatever the order in which the claims meet (a claim that finds
    // A's place taken by another worker meanwhile must not take A's next run instead of B's).
    const svc = await startTestService({
      env: { SVC_WORKER_CONCURRENCY: '1', SVC_ORG_CONCURRENCY: '3', SVC_RUN_LEASE_SECONDS: '30' },
    });
    const c = new Concurrency();
    let letGo: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    const workers = Array.from(
      { length: 3 },
      () =>
        new RunWorker(
          svc.service.deps,
          recordingExecutor(c, () => gate),
        ),
    );
    try {
      const a = await svc.createOrg('paid');
      const b = await svc.createOrg('paid');
      for (const org of [a, b]) await unlimited(svc, org);
      await pendingRuns(svc, a, (await newTask(svc, a)).id, 6);
      await pendingRuns(svc, b, (await newTask(svc, b)).id, 1);
      await slowClaims(svc);
      await Promise.all(workers.map((w) => w.start()));
      await waitFor('three runs executing', async () => (c.order.length >= 3 ? true : undefined));
      const names = c.order.map((o) => (o === a.organizationId ? 'A' : 'B'));
      assert.deepEqual([...names].sort(), ['A', 'A', 'B'], names.join(','));
      letGo();
      const { db } = svc.service.deps;
      await everyRunEnded(db);
      assert.ok((c.peak.get(a.organizationId) ?? 0) <= 3);
    } finally {
      letGo();
      await Promise.all(workers.map((w) => w.stop(1_000)));
      await svc.close();
    }
  });
});
