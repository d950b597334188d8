// Adversarial: an organization (a free one) writes output schemas that are costly to compile or
// to apply: definitions that each refer twice to the next (exponential validation), a
// `pattern` that backtracks catastrophically on the output, and many references to one large
// definition (megabytes of code if references were inlined). What must hold: saving answers
// (201 or a 400 naming the problem), a run's check is stopped at its time limit and fails the
// run with "Output check failed", and meanwhile the service keeps answering and other
// organizations' runs complete.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SCHEMA_CHECK_SECONDS } from '../../src/lib/json-schema-check.ts';
import type { ModelReply, ModelServer } from '../helpers/model-server.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService } from '../helpers/runs.ts';
import type { TestService } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';

/** d0 → d1 twice → d2 twice → … : 2^40 checks of one value (2^30 passed within the limit on a fast idle machine). */
function exponentialSchema(levels = 40): Record<string, unknown> {
  const definitions: Record<string, unknown> = { [`d${levels}`]: { type: 'integer' } };
  for (let i = 0; i < levels; i++) {
    definitions[`d${i}`] = {
      allOf: [{ $ref: `#/definitions/d${i + 1}` }, { $ref: `#/definitions/d${i + 1}` }],
    };
  }
  return { $ref: '#/definitions/d0', definitions };
}

/** One definition of ~30 KiB, referred to ~1,000 times. */
function manyRefsSchema(): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < 400; i++) properties[`p${i}`] = { type: 'string', minLength: i, maxLength: i + 100 };
  const allOf = Array.from({ length: 1000 }, () => ({ $ref: '#/definitions/big' }));
  return { definitions: { big: { type: 'object', properties } }, allOf };
}

function reply(prompt: string): ModelReply {
  if (prompt.startsWith('exponential')) return { content: '7' };
  if (prompt.startsWith('backtrack')) return { content: JSON.stringify(`${'a'.repeat(40)}!`) };
  return { content: '{"ok": true}' };
}

describe('output schemas that are costly to compile or to apply', () => {
  let svc: TestService;
  let model: ModelServer;
  let attacker: Org;
  let other: Org;
  before(async () => {
    ({ svc, model } = await startWorkerService((prompt) => reply(prompt)));
    attacker = await svc.createOrg('free');
    other = await svc.createOrg('paid');
  });
  after(async () => {
    await svc.close();
    await model.close();
  });

  test('many references to one large definition compile at save as calls, not copies, or are refused at the time limit', async () => {
    const schema = manyRefsSchema();
    assert.ok(JSON.stringify(schema).length < 64 * 1024);
    // Inlined, this schema needs gigabytes; as calls it compiles in under a second (a busy
    // machine may still pass the limit: the refusal says so).
    const res = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: attacker.apiKey,
      body: {
        organizationId: attacker.organizationId,
        name: 'Refs',
        prompt: 'refs',
        schedule: 'daily',
        outputSchema: schema,
      },
    });
    if (res.status !== 201) {
      assert.equal(res.status, 400, res.raw);
      assert.match(res.body.error.details[0].message, /could not be compiled: it took more than/);
    }
  });

  test("an organization's saves are checked one at a time: a second one at once is a 429", async () => {
    const body = (name: string) => ({
      organizationId: attacker.organizationId,
      name,
      prompt: 'refs',
      schedule: 'daily',
      outputSchema: manyRefsSchema(),
    });
    const [a, b] = await Promise.all(
      ['A', 'B'].map((name) =>
        svc.call({ method: 'POST', url: '/api/svc/tasks', key: attacker.apiKey, body: body(name) }),
      ),
    );
    const statuses = [a?.status, b?.status].sort();
    assert.equal(statuses[1], 429, `${a?.raw} ${b?.raw}`);
    const refused = a?.status === 429 ? a : b;
    assert.equal(refused?.headers['retry-after'], '5');
  });

  for (const [name, prompt, schema] of [
    ['definitions that each refer twice to the next', 'exponential', exponentialSchema()],
    ['a pattern that backtracks catastrophically', 'backtrack', { type: 'string', pattern: '^(a+)+$' }],
  ] as const) {
    test(`${name}: the check is stopped at its limit, the run fails, and the service keeps answering`, async () => {
      const task = await newTask(svc, attacker, { prompt: `${prompt} ${Date.now()}`, outputSchema: schema });
      const runId = await runNow(svc, attacker, task.id);
      // While the check runs (the model has answered), the API and another organization's run go on.
      await waitFor('the model to answer', async () =>
        model.requests.some((r) => r.body.messages.some((m) => m.content === task.prompt)) ? true : undefined,
      );
      const health = await svc.call({ method: 'GET', url: '/healthz' });
      assert.equal(health.status, 200);
      const otherTask = await newTask(svc, other, { prompt: `plain ${Date.now()}` });
      const otherRun = await finishedRun(svc, other, await runNow(svc, other, otherTask.id));
      assert.equal(otherRun.status, 'completed', otherRun.error);

      const run = await finishedRun(svc, attacker, runId, 60_000);
      assert.equal(run.status, 'failed');
      assert.equal(
        run.error,
        `Output check failed: the output could not be checked against outputSchema: it took more than ${SCHEMA_CHECK_SECONDS} s; simplify the schema`,
      );
      assert.ok(run.output, 'the output is kept');
    });
  }
});
