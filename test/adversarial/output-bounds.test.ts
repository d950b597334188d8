// Adversarial: a model provider that does not stop. It ignores max_tokens and streams an answer
// forever, streams one event that never ends its line, asks for tool calls with arguments
// longer than any answer may be, or for hundreds of tool calls at once. What must hold: each
// answer is stopped at its bound (the provider's connection closed), the run ends the way
// docs/api.md says (a text answer kept, cut and marked; an answer calling tools, or a broken
// stream, failing the run), its usage is on the ledger, it is executed once, and the service
// keeps answering.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MAX_TOOL_CALLS_PER_ANSWER } from '../../src/runner/model-answer.ts';
import type { ModelReply, ModelServer } from '../helpers/model-server.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService, unlimited } from '../helpers/runs.ts';
import type { TestService } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';

const MAX_CHARS = 5_000;
const MAX_TOKENS = 1_234;
// Short, so that a run that is never stopped by its bound fails here within the test's wait.
const RUN_TIMEOUT_SECONDS = 10;
const WAIT_MS = (RUN_TIMEOUT_SECONDS + 10) * 1000;

function reply(prompt: string): ModelReply {
  if (prompt.startsWith('endless text')) return { endless: 'All work and no play. ' };
  if (prompt.startsWith('endless line')) return { endlessLine: true };
  if (prompt.startsWith('length'))
    return { content: 'A report that the provider ended at max_tokens', finishReason: 'length' };
  if (prompt.startsWith('long arguments'))
    return { toolCalls: [{ name: 'search', arguments: { q: 'x'.repeat(4 * MAX_CHARS) } }] };
  if (prompt.startsWith('many calls')) {
    const calls = Array.from({ length: MAX_TOOL_CALLS_PER_ANSWER + 72 }, (_, i) => ({
      name: 'lookup',
      arguments: { i },
    }));
    return { toolCalls: calls };
  }
  return {};
}

describe('a model answer past its bounds', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;

  before(async () => {
    ({ svc, model } = await startWorkerService(reply, {
      SVC_MAX_OUTPUT_CHARS: String(MAX_CHARS),
      SVC_MAX_OUTPUT_TOKENS: String(MAX_TOKENS),
      SVC_RUN_TIMEOUT_SECONDS: String(RUN_TIMEOUT_SECONDS),
    }));
    org = await svc.createOrg();
    await unlimited(svc, org);
  });
  after(async () => {
    await svc?.close();
    await model?.close();
  });

  /** Runs a task with this prompt; returns the finished run and the model requests it made. */
  async function run(prompt: string) {
    const task = await newTask(svc, org, { prompt });
    const runId = await runNow(svc, org, task.id);
    const finished = await finishedRun(svc, org, runId, WAIT_MS);
    const requests = () =>
      model.requests.filter((r) => r.body.messages.some((m) => m.role === 'user' && m.content === prompt));
    return { finished, requests };
  }

  /** The run's tokens are on the ledger (the statistics add up the ledger) and were counted. */
  async function assertOnLedger(tokensUsed: number) {
    assert.ok(tokensUsed > 0, 'a stopped answer still records its (estimated) usage');
    const stats = await svc.call({
      method: 'GET',
      url: `/api/svc/stats?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    assert.equal(stats.status, 200, stats.raw);
    assert.ok(stats.body.totalTokensUsed >= tokensUsed, stats.raw);
  }

  /** The provider's endless stream sees its connection closed (in its own time: it learns it on its next write). */
  async function providerStopped(before: number) {
    await waitFor('the provider to see the stream closed', async () =>
      model.endless.stopped > before ? true : undefined,
    );
    assert.equal(model.endless.stopped, before + 1);
  }

  /** The run is not executed again: no lease expiry or retry sends its prompt a second time. */
  async function assertExecutedOnce(requests: () => unknown[]) {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(requests().length, 1);
  }

  test('an answer that never ends is stopped at SVC_MAX_OUTPUT_CHARS and kept, cut and marked', async () => {
    const stoppedBefore = model.endless.stopped;
    const { finished, requests } = await run('endless text');
    assert.equal(finished.status, 'completed', JSON.stringify(finished));
    const marker = `\n\n[output cut at ${MAX_CHARS.toLocaleString('en-US')} characters, the limit of a model answer]`;
    assert.ok(finished.output.endsWith(marker), finished.output.slice(-200));
    assert.equal(finished.output.length, MAX_CHARS + marker.length);
    assert.ok(finished.output.startsWith('All work and no play. All work'));
    await providerStopped(stoppedBefore);
    await assertOnLedger(finished.tokensUsed);
    await assertExecutedOnce(requests);
    // The service still answers, and the next run is an ordinary one.
    const health = await svc.call({ method: 'GET', url: '/healthz' });
    assert.equal(health.status, 200);
    const next = await run('an ordinary prompt');
    assert.equal(next.finished.status, 'completed');
    assert.equal(next.finished.output, 'Answer to: an ordinary prompt');
  });

  test('each request carries max_tokens, and an answer the provider ended there is marked', async () => {
    const { finished, requests } = await run('length limited');
    assert.equal(requests()[0]?.body.max_tokens, MAX_TOKENS);
    assert.equal(finished.status, 'completed', JSON.stringify(finished));
    assert.equal(
      finished.output,
      `A report that the provider ended at max_tokens\n\n[output cut at ${MAX_TOKENS.toLocaleString('en-US')} tokens, the limit of a model answer]`,
    );
  });

  test('an answer calling tools that passes the limit fails the run with its usage recorded', async () => {
    const { finished, requests } = await run('long arguments');
    assert.equal(finished.status, 'failed', JSON.stringify(finished));
    assert.match(finished.error, /passed 5,000 characters, the limit of one answer \(SVC_MAX_OUTPUT_CHARS\)/);
    await assertOnLedger(finished.tokensUsed);
    await assertExecutedOnce(requests);
  });

  test(`an answer with more than ${MAX_TOOL_CALLS_PER_ANSWER} tool calls fails the run without calling any`, async () => {
    const { finished, requests } = await run('many calls');
    assert.equal(finished.status, 'failed', JSON.stringify(finished));
    assert.match(
      finished.error,
      new RegExp(`more than ${MAX_TOOL_CALLS_PER_ANSWER} tool calls in one answer`),
    );
    await assertOnLedger(finished.tokensUsed);
    await assertExecutedOnce(requests);
  });

  test('one streamed event that never ends its line is stopped at the byte bound and fails the run', async () => {
    const stoppedBefore = model.endless.stopped;
    const { finished, requests } = await run('endless line');
    assert.equal(finished.status, 'failed', JSON.stringify(finished));
    assert.match(finished.error, /sent one streamed event larger than \d+ bytes/);
    await providerStopped(stoppedBefore);
    await assertOnLedger(finished.tokensUsed);
    await assertExecutedOnce(requests);
  });
});
