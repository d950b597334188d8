// A task's run checks applied by the worker, against the local model stand-in: the cost cap
// bounds each call's max_tokens and stops the tool loop at the step that reaches it; the output
// schema is asked for (structured output where the catalog says so, instructions otherwise) and
// checked; required tools must have been called. A failed check keeps the output and the usage.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ModelReply, ModelRequest, ModelServer } from './helpers/model-server.ts';
import {
  create,
  finishedRun,
  newTask,
  type Org,
  runNow,
  startWorkerService,
  unlimited,
} from './helpers/runs.ts';
import type { TestService } from './helpers/service.ts';

/** 1/128 of a dollar: sums of it are exact in binary. */
const STEP_COST_USD = 0.0078125;
const SCHEMA = {
  type: 'object',
  properties: { title: { type: 'string' }, count: { type: 'integer' } },
  required: ['title'],
};

const offered = (request: ModelRequest, tool: string) =>
  request.body.tools?.map((t) => t.function.name).find((n) => n.endsWith(`__${tool}`)) ?? `missing_${tool}`;

/** Scripts per prompt keyword. */
function script(prompt: string, request: ModelRequest): ModelReply {
  const step = request.body.messages.filter((m) => m.role === 'assistant').length;
  const usage = { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150, cost: STEP_COST_USD };
  if (prompt.startsWith('loop'))
    return { toolCalls: [{ name: offered(request, 'current_time'), arguments: {} }], usage };
  if (prompt.startsWith('cut')) return { content: '{"title": "half', finishReason: 'length' };
  if (prompt.startsWith('json-fenced')) return { content: '```json\n{"title": "Weekly", "count": 3}\n```' };
  if (prompt.startsWith('json-good')) return { content: '{"title": "Weekly", "count": 3}' };
  if (prompt.startsWith('json-wrong')) return { content: '{"title": 5}' };
  if (prompt.startsWith('json-none')) return { content: 'Here is your report: all good.' };
  if (prompt.startsWith('tools-one') || prompt.startsWith('tools-both')) {
    if (step === 0) {
      const calls = [{ name: offered(request, 'current_time'), arguments: {} }];
      if (prompt.startsWith('tools-both'))
        calls.push({ name: offered(request, 'fetch_url'), arguments: { url: 'ftp://nowhere' } as never });
      return { toolCalls: calls };
    }
    return { content: 'done' };
  }
  return {};
}

describe('run checks applied to runs', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;
  let local: { id: string };
  before(async () => {
    ({ svc, model } = await startWorkerService((prompt, _i, request) => script(prompt, request)));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
    local = await create(svc, org, 'sources', {
      type: 'local',
      name: 'Built-in',
      slug: 'builtin',
      config: {},
    });
  });
  after(async () => {
    await svc.close();
    await model.close();
  });

  const requestsOf = (task: { prompt: string }) =>
    model.requests.filter((r) => r.body.messages.some((m) => m.role === 'user' && m.content === task.prompt));
  const run = async (extra: Record<string, unknown>) => {
    const task = await newTask(svc, org, extra);
    return { task, run: await finishedRun(svc, org, await runNow(svc, org, task.id)) };
  };
  const price = (routerModelId: string) => {
    const m = svc.service.deps.models.find(routerModelId);
    assert.ok(m);
    return m;
  };

  test("a cost cap bounds the first call's max_tokens by what is left after its input at the catalog's prices", async () => {
    const { task } = await run({ prompt: 'json-good capped', maxCostCentsPerRun: 1 });
    const [first] = requestsOf(task);
    assert.ok(first);
    const m = price(task.model);
    const inputBound = Buffer.byteLength(JSON.stringify(first.body.messages));
    const expected = Math.floor(
      ((1 - (inputBound * m.inputCentsPerMillionTokens) / 1e6) * 1e6) / m.outputCentsPerMillionTokens,
    );
    assert.ok(expected < 16_384, 'the cap binds here');
    assert.equal(first.body.max_tokens, expected);
  });

  test('SVC_MAX_OUTPUT_TOKENS still applies when the cap leaves more room, and without a cap', async () => {
    const { task: high } = await run({ prompt: 'json-good roomy', maxCostCentsPerRun: 100_000 });
    assert.equal(requestsOf(high)[0]?.body.max_tokens, 16_384);
    const { task: none } = await run({ prompt: 'json-good uncapped' });
    assert.equal(requestsOf(none)[0]?.body.max_tokens, 16_384);
  });

  test('the tool loop stops after the step that reaches the cap; the run fails with the cap and the cost, usage recorded', async () => {
    // 0.78125 cents a step: 1.5625 after two steps, 2.34375 after the third, which reaches 2.
    const { task, run: r } = await run({
      prompt: 'loop until the cap',
      sourceIds: [local.id],
      maxCostCentsPerRun: 2,
    });
    assert.equal(r.status, 'failed');
    assert.match(
      r.error,
      /^Cost limit reached: this run cost 2\.34\d* cents, and the task's maxCostCentsPerRun is 2 cents/,
    );
    assert.equal(requestsOf(task).length, 3, 'no call after the one that reached the cap');
    assert.equal(r.tokensUsed, 3 * 150);
    assert.equal(r.costCents, 2.34375);
    const [ledger] = await svc.testDb.db.query<{
      status: string;
      tokens_used: number;
      cost_cents: number;
      calls: number;
    }>(
      `SELECT l.status, l.tokens_used, l.cost_cents::float8 AS cost_cents,
              (SELECT count(*)::int FROM usage_calls c WHERE c.run_id = l.run_id) AS calls
         FROM usage_ledger l WHERE l.run_id = $1`,
      [r.id],
    );
    assert.deepEqual(ledger, { status: 'failed', tokens_used: 450, cost_cents: 2.34375, calls: 3 });
  });

  test('a cap of 0 fails the run at once: no model call', async () => {
    const { task, run: r } = await run({ prompt: 'json-good at zero', maxCostCentsPerRun: 0 });
    assert.equal(r.status, 'failed');
    assert.match(
      r.error,
      /^Cost limit reached: the task's maxCostCentsPerRun is 0 cents, so no model call is made/,
    );
    assert.equal(requestsOf(task).length, 0);
    assert.equal(r.tokensUsed, 0);
  });

  test('a cap too small for the input of a call fails the run without making it', async () => {
    const { task, run: r } = await run({ prompt: 'json-good tiny cap', maxCostCentsPerRun: 0.000001 });
    assert.equal(r.status, 'failed');
    assert.match(
      r.error,
      /^Cost limit reached: this run cost 0 cents, .*maxCostCentsPerRun is 0\.000001 cents.*not made/,
    );
    assert.equal(requestsOf(task).length, 0);
  });

  test('a final answer cut at the max_tokens the cap left fails with Cost limit reached, its output kept', async () => {
    const { run: r } = await run({ prompt: 'cut short', maxCostCentsPerRun: 1 });
    assert.equal(r.status, 'failed');
    assert.match(r.error, /^Cost limit reached: the final answer was cut at [\d,]+ tokens/);
    assert.match(r.output, /^\{"title": "half\n\n\[output cut at [\d,]+ tokens/);
  });

  test('a model the catalog says takes a schema is sent response_format json_schema, and a matching output completes', async () => {
    assert.equal(price('google/gemini-2.5-flash').supportsStructuredOutput, true);
    const { task, run: r } = await run({
      prompt: 'json-good structured',
      model: 'google/gemini-2.5-flash',
      outputSchema: SCHEMA,
    });
    assert.equal(r.status, 'completed', r.error);
    assert.equal(r.output, '{"title": "Weekly", "count": 3}');
    const [first] = requestsOf(task);
    assert.deepEqual(first?.body.response_format, {
      type: 'json_schema',
      json_schema: { name: 'run_output', schema: SCHEMA, strict: false },
    });
    assert.ok(
      !first?.body.messages.some((m) => m.content?.includes('JSON Schema:')),
      'no instruction as well',
    );
  });

  test('another model is asked in the messages, just before the prompt, and a fenced JSON answer completes', async () => {
    assert.notEqual(price('meta-llama/llama-4-maverick').supportsStructuredOutput, true);
    const { task, run: r } = await run({
      prompt: 'json-fenced instructed',
      model: 'meta-llama/llama-4-maverick',
      outputSchema: SCHEMA,
    });
    assert.equal(r.status, 'completed', r.error);
    const [first] = requestsOf(task);
    assert.equal(first?.body.response_format, undefined);
    const messages = first?.body.messages ?? [];
    const instruction = messages.at(-2);
    assert.equal(instruction?.role, 'system');
    assert.match(instruction?.content ?? '', /one JSON value that matches the JSON Schema below/);
    assert.equal(
      instruction?.content?.split('JSON Schema:\n')[1],
      JSON.stringify(SCHEMA),
      'the schema as written',
    );
    assert.equal(messages.at(-1)?.content, task.prompt);
  });

  test('an output that is not JSON fails the check; the output and the usage are kept', async () => {
    const { run: r } = await run({ prompt: 'json-none', outputSchema: SCHEMA });
    assert.equal(r.status, 'failed');
    assert.match(r.error, /^Output check failed: the output is not JSON \(/);
    assert.equal(r.output, 'Here is your report: all good.');
    assert.equal(r.tokensUsed, 150);
  });

  test('an output that does not match the schema fails the check, naming the first problem', async () => {
    const { run: r } = await run({ prompt: 'json-wrong', outputSchema: SCHEMA });
    assert.equal(r.status, 'failed');
    assert.equal(
      r.error,
      'Output check failed: the output does not match outputSchema: /title must be string',
    );
    assert.equal(r.output, '{"title": 5}');
  });

  test('a required tool the model did not call fails the run, naming each one missing', async () => {
    const { run: r } = await run({
      prompt: 'tools-one',
      sourceIds: [local.id],
      requiredTools: ['builtin__current_time', 'fetch_url', 'builtin__nothing'],
    });
    assert.equal(r.status, 'failed');
    assert.equal(r.error, 'Output check failed: fetch_url was not called; builtin__nothing was not called');
    assert.equal(r.output, 'done');
  });

  test('required tools called, by their offered or their own names, pass', async () => {
    const { run: r } = await run({
      prompt: 'tools-both',
      sourceIds: [local.id],
      requiredTools: ['builtin__current_time', 'fetch_url'],
    });
    assert.equal(r.status, 'completed', r.error);
    assert.equal(r.output, 'done');
  });
});
