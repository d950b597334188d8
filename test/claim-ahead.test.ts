// Claiming ahead (src/worker/claim-ahead.ts): a worker whose runs are short claims more runs
// than it has free places, holds the extra ones and begins each the moment a place frees. What
// must hold: no more runs execute at once than its concurrency, a held run's duration is its
// execution's (not its wait), a held run stopped before it begins (shutdown, cancel) goes where
// a stopped run goes, and a worker whose runs are long holds nothing.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { ClaimAhead } from '../src/worker/claim-ahead.ts';
import type { ModelReply } from './helpers/model-server.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService, unlimited } from './helpers/runs.ts';
import type { TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

/** How long a held run is kept waiting here: its duration must not include it. */
const HOLD_MS = 1_000;

/** A gate the test opens: the model answers the gated prompt only then. */
function gate() {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

interface Harness {
  svc: TestService;
  org: Org;
  /** When the model received each prompt's request (ms, this process's clock). */
  asked: Map<string, number>;
  /** Most model requests in flight at once. */
  peak: () => number;
  close(): Promise<void>;
}

/**
 * A worker of concurrency 1 whose model answers `gated` prompts only once `g` opens, others
 * after `delayMs`, and whose runs are short under `shortMs` (SVC_WORKER_CLAIM_AHEAD_MS; the
 * held-run tests set it far above what a run takes on a busy machine).
 */
async function harness(g: { opened: Promise<void> }, delayMs: number, shortMs: number): Promise<Harness> {
  const asked = new Map<string, number>();
  let inFlight = 0;
  let most = 0;
  const { svc, model } = await startWorkerService(
    (prompt): ModelReply => {
      asked.set(prompt, Date.now());
      most = Math.max(most, ++inFlight);
      const done = prompt.startsWith('gated') ? g.opened : new Promise((r) => setTimeout(r, delayMs));
      void done.then(() => inFlight--);
      return { heldUntil: done };
    },
    {
      SVC_WORKER_CONCURRENCY: '1',
      SVC_ORG_CONCURRENCY: '5',
      SVC_RUN_LEASE_SECONDS: '30',
      SVC_WORKER_CLAIM_AHEAD_MS: String(shortMs),
    },
  );
  const org = await svc.createOrg('paid');
  await unlimited(svc, org);
  return {
    svc,
    org,
    asked,
    peak: () => most,
    close: async () => {
      await svc.close();
      await model.close();
    },
  };
}

/** Runs of new tasks with these prompts, made one after the other. */
async function runsOf(h: Harness, prompts: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const prompt of prompts)
    ids.push(await runNow(h.svc, h.org, (await newTask(h.svc, h.org, { prompt })).id));
  return ids;
}

/** A few runs executed one at a time, so that the worker knows how long its runs take. */
async function warmUp(h: Harness): Promise<void> {
  for (let i = 0; i < 8; i++) {
    const [id] = await runsOf(h, [`warm ${randomUUID()}`]);
    await finishedRun(h.svc, h.org, id as string);
  }
}

async function statusOf(h: Harness, runId: string) {
  const [row] = await h.svc.testDb.db.query<{ status: string; lease_owner: string | null; attempts: number }>(
    'SELECT status, lease_owner, attempts FROM runs WHERE id = $1',
    [runId],
  );
  return row;
}

/**
 * A worker of concurrency 1 whose runs are short, executing `slow` (its answer held until the
 * gate opens) and holding `next`, claimed ahead; `body` goes on from there.
 */
async function withRunHeld(
  body: (s: { h: Harness; open: () => void; slow: string; next: string }) => Promise<void>,
): Promise<void> {
  const g = gate();
  const h = await harness(g, 0, 10_000);
  try {
    await warmUp(h);
    const [slow, next] = await runsOf(h, [`gated ${randomUUID()}`, `next ${randomUUID()}`]);
    assert.ok(slow && next);
    await waitFor('the next run claimed while the gated one executes', async () =>
      (await statusOf(h, next))?.status === 'running' ? true : undefined,
    );
    await body({ h, open: g.open, slow, next });
  } finally {
    g.open();
    await h.close();
  }
}

/** The run after a gated one stays in the queue while the gated one executes. */
async function onlyFreePlacesClaimed(delayMs: number, shortMs: number): Promise<void> {
  const g = gate();
  const h = await harness(g, delayMs, shortMs);
  try {
    await warmUp(h);
    const [slow, next] = await runsOf(h, [`gated ${randomUUID()}`, `next ${randomUUID()}`]);
    assert.ok(slow && next);
    await waitFor('the gated run executing', async () =>
      [...h.asked.keys()].some((p) => p.startsWith('gated')) ? true : undefined,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal((await statusOf(h, next))?.status, 'pending', 'left in the queue for any worker');
    g.open();
    assert.equal((await finishedRun(h.svc, h.org, next)).status, 'completed');
  } finally {
    g.open();
    await h.close();
  }
}

describe('how many runs a worker holds ahead', () => {
  const shortRuns = (concurrency: number) => {
    const ahead = new ClaimAhead(concurrency, 50);
    ahead.executed(2);
    return ahead;
  };

  test('twice its concurrency while runs are short, at most 32 unless the concurrency is more', () => {
    assert.deepEqual(
      [1, 4, 8, 16, 20, 32, 64].map((c) => shortRuns(c).ahead),
      [2, 8, 16, 32, 32, 32, 64],
    );
  });

  test('none before the first run, once runs are long, or when told never to', () => {
    assert.equal(new ClaimAhead(8, 50).ahead, 0);
    const long = shortRuns(8);
    for (let i = 0; i < 20; i++) long.executed(200);
    assert.equal(long.ahead, 0);
    const never = new ClaimAhead(8, 0);
    never.executed(1);
    assert.equal(never.ahead, 0);
  });

  test('a claim asks for the free places, and refills the held runs once half of them have begun', () => {
    const ahead = shortRuns(8);
    assert.equal(ahead.limit(8), 8 + 16);
    for (let i = 0; i < 9; i++) ahead.hold({} as never);
    assert.equal(ahead.limit(2), 2, 'more than half still held: no refill');
    ahead.next();
    assert.equal(ahead.limit(2), 2 + 16 - 8);
  });
});

describe('claiming ahead', () => {
  test('a worker whose runs are short holds a claimed run while its place is taken, begins it when the place frees, and records its duration from then', async () => {
    await withRunHeld(async ({ h, open, slow, next }) => {
      await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
      assert.equal([...h.asked.keys()].filter((p) => p.startsWith('next')).length, 0, 'held, not begun');
      const opened = Date.now();
      open();
      const run = await finishedRun(h.svc, h.org, next);
      assert.equal(run.status, 'completed', JSON.stringify(run));
      assert.ok(run.durationMs < HOLD_MS, `its duration is its execution's: ${run.durationMs} ms`);
      assert.ok(Date.parse(run.startedAt) >= opened - 50, `${run.startedAt} is when it began`);
      assert.equal((await finishedRun(h.svc, h.org, slow)).status, 'completed');
      assert.equal(h.peak(), 1, 'never more than the concurrency at once');
    });
  });

  test('a held run goes back to the queue at once when the worker stops, while the executing one finishes', async () => {
    await withRunHeld(async ({ h, open, slow, next }) => {
      const stopped = h.svc.service.worker?.stop(30_000);
      await waitFor('the held run back in the queue', async () =>
        (await statusOf(h, next))?.status === 'pending' ? true : undefined,
      );
      assert.deepEqual(await statusOf(h, next), { status: 'pending', lease_owner: null, attempts: 0 });
      open();
      await stopped;
      assert.equal((await statusOf(h, slow))?.status, 'completed');
      assert.equal(h.asked.size, 9, 'the held run was never sent to the model');
    });
  });

  test('a held run that is canceled ends canceled without its model being asked', async () => {
    await withRunHeld(async ({ h, open, slow, next }) => {
      const res = await h.svc.call({
        method: 'POST',
        url: `/api/svc/runs/${next}/cancel`,
        key: h.org.apiKey,
      });
      assert.equal(res.status, 202, res.raw);
      assert.equal(res.body.status, 'failed');
      // The cancel reaches the worker by NOTIFY and a look at its runs: a place freed before
      // then would begin the run (its execution is aborted when the cancel arrives). Once the
      // worker has let it go, only the gated run is its own.
      await waitFor('the worker lets the canceled run go', async () =>
        h.svc.service.worker?.inFlight === 1 ? true : undefined,
      );
      open();
      assert.equal((await finishedRun(h.svc, h.org, slow)).status, 'completed');
      const canceled = await finishedRun(h.svc, h.org, next);
      assert.equal(canceled.status, 'failed');
      assert.equal(canceled.tokensUsed, 0);
      // The worker went on: a run made after the cancel is executed.
      const [after] = await runsOf(h, [`after ${randomUUID()}`]);
      assert.equal((await finishedRun(h.svc, h.org, after as string)).status, 'completed');
      assert.equal([...h.asked.keys()].filter((p) => p.startsWith('next')).length, 0);
    });
  });

  for (const [name, delayMs, shortMs] of [
    ['a worker whose runs are long claims only for its free places', 120, 50],
    ['a worker told never to claim ahead (0) claims only for its free places, however short its runs', 0, 0],
  ] as const)
    test(name, async () => {
      await onlyFreePlacesClaimed(delayMs, shortMs);
    });
});
