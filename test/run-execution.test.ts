// The run engine against a scripted model provider: the tool loop, streaming, retries,
// time-outs, step limit, skills' required sources, and what a run records.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  type ModelReply,
  type ModelRequest,
  type ModelServer,
  startModelServer,
} from './helpers/model-server.ts';
import {
  create,
  finishedRun,
  newTask,
  type Org,
  runNow,
  startWorkerService,
  unlimited,
} from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';

/** The name under which the request offered a tool whose own name is `tool`. */
function offered(request: ModelRequest, tool: string): string {
  const name = request.body.tools?.map((t) => t.function.name).find((n) => n.endsWith(`__${tool}`));
  assert.ok(
    name,
    `the tool ${tool} was offered; offered: ${request.body.tools?.map((t) => t.function.name)}`,
  );
  return name;
}

const toolResults = (request: ModelRequest) => request.body.messages.filter((m) => m.role === 'tool');

/** Scripts per prompt keyword: each test's prompt says which script the model follows. */
function script(prompt: string, request: ModelRequest): ModelReply {
  const step = request.body.messages.filter((m) => m.role === 'assistant').length;
  if (prompt.startsWith('clock')) {
    if (step === 0) {
      return {
        toolCalls: [{ name: offered(request, 'current_time'), arguments: { timezone: 'Asia/Tokyo' } }],
        usage: { prompt_tokens: 200, completion_tokens: 20, total_tokens: 220 },
      };
    }
    const result = toolResults(request)[0]?.content ?? '';
    return {
      content: `Tokyo says: ${result}`,
      usage: { prompt_tokens: 300, completion_tokens: 30, total_tokens: 330 },
    };
  }
  if (prompt.startsWith('priced')) {
    return step === 0
      ? {
          toolCalls: [{ name: offered(request, 'current_time'), arguments: {} }],
          usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, cost: 0.01 },
        }
      : { content: 'done', usage: { prompt_tokens: 20, completion_tokens: 5, total_tokens: 25, cost: 0.02 } };
  }
  if (prompt.startsWith('forever'))
    return { toolCalls: [{ name: offered(request, 'current_time'), arguments: {} }] };
  if (prompt.startsWith('confused')) {
    if (step === 0) {
      return {
        toolCalls: [
          { name: 'no_such_tool', arguments: {} },
          { name: offered(request, 'current_time'), arguments: '{not json' },
        ],
      };
    }
    return {
      content: toolResults(request)
        .map((m) => m.content)
        .join(' | '),
    };
  }
  return {};
}

describe('run execution with tools', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;
  let local: { id: string; slug: string };
  before(async () => {
    ({ svc, model } = await startWorkerService((prompt, _i, request) => script(prompt, request), {
      SVC_MAX_TOOL_STEPS: '3',
    }));
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

  test('a model that calls a tool gets its result back and the run records the answer and every step', async () => {
    const skill = await create(svc, org, 'skills', {
      name: 'Clock reader',
      content: 'Read the clock before answering.',
      frontmatter: { requiredSources: ['builtin'] },
    });
    const task = await newTask(svc, org, {
      prompt: 'clock: what time is it in Tokyo?',
      sourceIds: [local.id],
      skillIds: [skill.id],
    });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'completed', run.error);
    assert.match(run.output, /^Tokyo says: .*Asia\/Tokyo/s);
    assert.equal(run.tokensUsed, 220 + 330, 'tokens of both steps');
    const entry = svc.service.deps.models.find(task.model);
    assert.ok(entry);
    const expected = (500 * entry.inputCentsPerMillionTokens + 50 * entry.outputCentsPerMillionTokens) / 1e6;
    assert.ok(Math.abs(run.costCents - expected) < 1e-9, `${run.costCents} vs ${expected}`);

    const [first, second] = requestsOf(task);
    assert.ok(first && second, 'two model calls');
    assert.equal(first.body.stream, true, 'answers are streamed');
    assert.equal(first.body.model, task.model);
    const tool = first.body.tools?.find((t) => t.function.name === 'builtin__current_time');
    assert.ok(tool, 'the tool is offered under its source slug');
    assert.equal((tool.function.parameters as { type: string }).type, 'object');
    assert.match(first.body.messages[0]?.content ?? '', /^# Skill: Clock reader/);
    const call = second.body.messages.find((m) => m.role === 'assistant')?.tool_calls?.[0];
    assert.equal(call?.function.name, 'builtin__current_time');
    const [result] = toolResults(second);
    assert.equal(result?.tool_call_id, call?.id, 'the result answers the call');
    assert.match(result?.content ?? '', /Asia\/Tokyo/);
  });

  test("skills and sources attached by a later update reach the task's next run, and those detached leave it", async () => {
    // The claim reads the link tables only for a task whose row lists any (run-context.ts).
    const skill = await create(svc, org, 'skills', { name: 'Late skill', content: 'Answer in one line.' });
    const task = await newTask(svc, org, { prompt: 'late attachments' });
    const attach = async (skillIds: string[], sourceIds: string[]) => {
      const res = await svc.call({
        method: 'PATCH',
        url: `/api/svc/tasks/${task.id}`,
        key: org.apiKey,
        body: { skillIds, sourceIds },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    };
    const runOnce = async () => {
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'completed', run.error);
    };
    await runOnce();
    await attach([skill.id], [local.id]);
    await runOnce();
    await attach([], []);
    await runOnce();
    const requests = requestsOf(task);
    assert.equal(requests.length, 3);
    const skilled = requests.map((r) => /# Skill: Late skill/.test(r.body.messages[0]?.content ?? ''));
    const tooled = requests.map((r) =>
      (r.body.tools ?? []).some((t) => t.function.name.startsWith('builtin__')),
    );
    assert.deepEqual(skilled, [false, true, false]);
    assert.deepEqual(tooled, [false, true, false]);
  });

  test('a provider-reported cost is summed over every step', async () => {
    const task = await newTask(svc, org, { prompt: 'priced', sourceIds: [local.id] });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'completed', run.error);
    assert.equal(run.tokensUsed, 40);
    assert.ok(Math.abs(run.costCents - 3) < 1e-9, String(run.costCents));
  });

  test('an unknown tool and arguments that are not JSON are told to the model, which can go on', async () => {
    const task = await newTask(svc, org, { prompt: 'confused', sourceIds: [local.id] });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'completed', run.error);
    assert.match(run.output, /no tool named "no_such_tool"/);
    assert.match(run.output, /not valid JSON/);
  });

  test('a model still calling tools at the step limit fails the run, with the tokens spent recorded', async () => {
    const task = await newTask(svc, org, { prompt: 'forever', sourceIds: [local.id] });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'failed');
    assert.match(run.error, /still calling tools after 3 steps.*SVC_MAX_TOOL_STEPS/);
    assert.equal(requestsOf(task).length, 3);
    assert.equal(run.tokensUsed, 3 * 150);
  });

  test('a skill whose required source is not attached fails the run before any model call, naming both', async () => {
    const skill = await create(svc, org, 'skills', {
      name: 'Needs GitHub',
      content: 'Use the GitHub tools.',
      frontmatter: { requiredSources: ['github'] },
    });
    const task = await newTask(svc, org, {
      prompt: 'needs github',
      skillIds: [skill.id],
      sourceIds: [local.id],
    });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'failed');
    assert.match(run.error, /Skill "Needs GitHub" requires the source "github", which is not attached/);
    assert.equal(requestsOf(task).length, 0);
  });

  test('a source on a private address fails the run with the reason, and its test says the same', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Intranet',
      config: { transport: 'http', url: 'http://127.0.0.1:9/mcp' },
    });
    const task = await newTask(svc, org, { prompt: 'intranet', sourceIds: [source.id] });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'failed');
    assert.match(run.error, /Intranet.*private or loopback address.*SVC_ALLOW_PRIVATE_URLS/);
    assert.equal(requestsOf(task).length, 0);
    const tested = await svc.call({
      method: 'POST',
      url: `/api/svc/sources/${source.id}/test`,
      key: org.apiKey,
    });
    assert.equal(tested.status, 200);
    assert.equal(tested.body.success, false);
    assert.match(tested.body.message, /private or loopback address/);
  });
});

describe('the model provider', () => {
  test('a request that gets no answer is retried after the request timeout', async () => {
    const { svc, model } = await startWorkerService((_p, i) => (i === 0 ? { hang: true } : {}), {
      SVC_MODEL_TIMEOUT_SECONDS: '1',
    });
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'completed', run.error);
      assert.equal(run.output, `Answer to: ${task.prompt}`);
      assert.equal(model.requests.length, 2);
    } finally {
      await svc.close();
      await model.close();
    }
  });

  test('a provider that never answers fails the run with a time-out that says so', async () => {
    const { svc, model } = await startWorkerService(() => ({ hang: true }), {
      SVC_MODEL_TIMEOUT_SECONDS: '1',
      SVC_RUN_TIMEOUT_SECONDS: '60',
    });
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id), 60_000);
      assert.equal(run.status, 'failed');
      assert.match(run.error, /did not start answering within 1 s \(5 attempts\)/);
      assert.equal(model.requests.length, 5);
    } finally {
      await svc.close();
      await model.close();
    }
  });

  test('an unreachable provider fails the run naming its address', async () => {
    const gone = await startModelServer();
    await gone.close();
    const svc = await startTestService({
      startLoops: true,
      env: { SVC_MODEL_BASE_URL: gone.url, SVC_MODEL_API_KEY: 'sk-test', SVC_RUN_LEASE_SECONDS: '1' },
    });
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org);
      const run = await finishedRun(svc, org, await runNow(svc, org, task.id), 60_000);
      assert.equal(run.status, 'failed');
      assert.ok(run.error.includes(`The model provider at ${gone.url} could not be reached`), run.error);
    } finally {
      await svc.close();
    }
  });
});
