// An answer cut off by its run's stop, after the provider had started sending it: the provider
// has charged for the prompt and for what it generated until the connection closed, so the
// call's usage is estimated (4 characters a token, of what was sent and what came) and recorded
// like any call's, whatever stopped the run. The cancel's case is in run-cancel.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ModelServer } from './helpers/model-server.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService, unlimited } from './helpers/runs.ts';
import type { TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

const PIECE = 'slow words ';

describe("an answer cut off by its run's stop", () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;

  before(async () => {
    ({ svc, model } = await startWorkerService(() => ({ endless: PIECE, trickleMs: 20 }), {
      SVC_RUN_TIMEOUT_SECONDS: '2',
      // Renewed about every 330 ms: the renewal is what finds a deleted task's run gone.
      SVC_RUN_LEASE_SECONDS: '1',
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc?.close();
    await model?.close();
  });

  /** The run's only model request, and the bounds of its estimate: what it sent, what could have come. */
  function estimateBounds(prompt: string, eventsBefore: number) {
    const requests = model.requests.filter((r) => r.body.messages.some((m) => m.content === prompt));
    assert.equal(requests.length, 1);
    const sent = JSON.stringify(requests[0]?.body.messages).length;
    const received = (model.endless.events - eventsBefore) * PIECE.length;
    return { least: Math.ceil(sent / 4) + 1, most: Math.ceil(sent / 4) + Math.ceil(received / 4) };
  }

  async function ledgerOf(runId: string) {
    const [row] = await svc.testDb.db.query<{ status: string; tokens_used: number; cost_cents: number }>(
      'SELECT status, tokens_used, cost_cents::float8 AS cost_cents FROM usage_ledger WHERE run_id = $1',
      [runId],
    );
    assert.ok(row);
    return row;
  }

  test('a run timed out while its answer streams is charged the estimate of that answer', async () => {
    const eventsBefore = model.endless.events;
    const task = await newTask(svc, org);
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'failed');
    assert.match(run.error, /did not finish within 2 s/);
    const { least, most } = estimateBounds(task.prompt, eventsBefore);
    assert.ok(run.tokensUsed >= least && run.tokensUsed <= most, `${run.tokensUsed} in [${least}, ${most}]`);
    assert.ok(run.costCents > 0, 'priced at the catalog prices');
    const ledger = await ledgerOf(run.id);
    assert.deepEqual(ledger, { status: 'failed', tokens_used: run.tokensUsed, cost_cents: run.costCents });
  });

  test("a run whose task is deleted while its answer streams keeps that answer's estimate on the ledger", async () => {
    const eventsBefore = model.endless.events;
    const stoppedBefore = model.endless.stopped;
    const task = await newTask(svc, org);
    const runId = await runNow(svc, org, task.id);
    await waitFor('the answer to be streaming', async () =>
      model.endless.events > eventsBefore ? true : undefined,
    );
    const res = await svc.call({ method: 'DELETE', url: `/api/svc/tasks/${task.id}`, key: org.apiKey });
    assert.equal(res.status, 204, res.raw);
    await waitFor('the worker to stop the run', async () =>
      svc.logs.some((l) => l.includes(runId) && l.includes('run stopped: it was deleted with its task'))
        ? true
        : undefined,
    );
    await waitFor('the stream to be stopped', async () =>
      model.endless.stopped === stoppedBefore + 1 ? true : undefined,
    );
    const { least, most } = estimateBounds(task.prompt, eventsBefore);
    const ledger = await ledgerOf(runId);
    assert.equal(ledger.status, 'failed');
    assert.ok(
      ledger.tokens_used >= least && ledger.tokens_used <= most,
      `${ledger.tokens_used} in [${least}, ${most}]`,
    );
    assert.ok(ledger.cost_cents > 0, 'priced at the catalog prices');
  });
});
