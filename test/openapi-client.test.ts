// A client generated from the served OpenAPI document works: openapi-typescript turns the
// document into types, the project's tsc type-checks a client written against them
// (test/client-flow/flow.ts), and that same client, driven by openapi-fetch, goes through a
// whole flow against the service listening on a port, with its worker and the model stand-in.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { astToString, openapiTS } from 'openapi-codegen';
import { type ModelServer, startModelServer } from './helpers/model-server.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

const FLOW = resolve('test/client-flow/flow.ts');
const ANSWER = 'Three meetings, no deadlines: a calm day.';

/** What the test reads of flow.ts (which the project's tsc does not see: its types are generated). */
interface FlowModule {
  clientFlow(
    baseUrl: string,
    apiKey: string,
    organizationId: string,
    runEnded: (runId: string) => Promise<void>,
  ): Promise<{
    skill: { id: string; name: string };
    task: { id: string; skillIds?: string[] };
    finished: { id?: string; taskId?: string; status?: string; output?: string; error?: string };
    taskRuns: { id?: string }[];
    deleteStatus: number;
    afterDelete: { status: number; code: string | undefined };
  }>;
}

/** The strictness the project's own code is checked with (tsconfig.json), for the client too. */
const TSCONFIG = {
  compilerOptions: {
    target: 'es2024',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    lib: ['es2024', 'dom'],
    types: [],
    strict: true,
    noUncheckedIndexedAccess: true,
    noUnusedLocals: true,
    noUnusedParameters: true,
    verbatimModuleSyntax: true,
    allowImportingTsExtensions: true,
    noEmit: true,
  },
  files: ['flow.ts'],
};

/** Runs the project's tsc (TypeScript 7) on a project directory; its exit status and output. */
function tsc(dir: string): { status: number | null; output: string } {
  const out = spawnSync(process.execPath, [resolve('node_modules/typescript/bin/tsc'), '-p', dir], {
    encoding: 'utf8',
  });
  return { status: out.status, output: `${out.stdout}${out.stderr}` };
}

describe('a client generated from the OpenAPI document', () => {
  let svc: TestService;
  let model: ModelServer;
  let base: string;
  let dir: string;
  let types: string;

  before(async () => {
    model = await startModelServer(() => ({ content: ANSWER }));
    svc = await startTestService({
      listen: true,
      startLoops: true,
      env: { SVC_MODEL_BASE_URL: model.url, SVC_MODEL_API_KEY: 'sk-test', HOST: '127.0.0.1' },
    });
    assert.ok(svc.service.url, 'the service listens');
    base = svc.service.url;
    const res = await fetch(`${base}/api/svc/openapi.json`);
    assert.equal(res.status, 200);
    types = astToString(await openapiTS((await res.json()) as Parameters<typeof openapiTS>[0]));
    // A project of its own in a temporary directory (outside node_modules, where Node would not
    // strip the types of the flow it imports), resolving packages from the project's node_modules.
    dir = mkdtempSync(join(tmpdir(), 'svc-openapi-client-'));
    symlinkSync(resolve('node_modules'), join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'api.ts'), types);
    copyFileSync(FLOW, join(dir, 'flow.ts'));
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  });
  after(async () => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    await svc?.close();
    await model?.close();
  });

  test('names each operation and each resource, so the generated types are named too', () => {
    for (const name of ['listTasks', 'createTask', 'runTask', 'getRun', 'listTaskRuns', 'deleteTask']) {
      assert.match(types, new RegExp(`\\b${name}: \\{`), `operations.${name}`);
    }
    for (const name of ['Task', 'Skill', 'Source', 'Run', 'RunWithDeliveries', 'Model', 'ErrorEnvelope']) {
      assert.match(types, new RegExp(`\\n {8}${name}: \\{`), `components.schemas.${name}`);
    }
  });

  test("type-checks with the project's tsc, and a call that breaks the contract does not", () => {
    const ok = tsc(dir);
    assert.equal(ok.status, 0, ok.output);
    // The check can fail: a task created without its prompt is refused by the generated types.
    const flow = readFileSync(FLOW, 'utf8').replace("prompt: 'Summarise the day ahead',", '');
    assert.notEqual(flow, readFileSync(FLOW, 'utf8'), 'the flow sends a prompt to take away');
    writeFileSync(join(dir, 'flow.ts'), flow);
    try {
      const bad = tsc(dir);
      assert.notEqual(bad.status, 0);
      assert.match(bad.output, /prompt/);
    } finally {
      copyFileSync(FLOW, join(dir, 'flow.ts'));
    }
  });

  test('creates a skill and a task with it, runs it against the model, reads the run, lists runs and deletes the task', async () => {
    const org = await svc.createOrg();
    // The copy tsc checked, run as it is (Node strips its types).
    const { clientFlow } = (await import(pathToFileURL(join(dir, 'flow.ts')).href)) as FlowModule;
    const result = await clientFlow(base, org.apiKey, org.organizationId, async (runId) => {
      await waitFor(`run ${runId} to end`, async () => {
        const [row] = await svc.testDb.db.query<{ status: string }>('SELECT status FROM runs WHERE id = $1', [
          runId,
        ]);
        return row && ['completed', 'failed'].includes(row.status) ? row : undefined;
      });
    });
    assert.equal(result.skill.name, 'Plain words');
    assert.deepEqual(result.task.skillIds, [result.skill.id]);
    assert.equal(result.finished.status, 'completed', result.finished.error);
    assert.equal(result.finished.output, ANSWER);
    assert.equal(result.finished.taskId, result.task.id);
    assert.deepEqual(
      result.taskRuns.map((r) => r.id),
      [result.finished.id],
    );
    assert.equal(result.deleteStatus, 204);
    assert.deepEqual(result.afterDelete, { status: 404, code: 'not_found' });
    // The skill reached the model: the run used the task's skill.
    const sent = JSON.stringify(model.requests.at(-1)?.body.messages);
    assert.match(sent, /Answer in plain words\./);
  });
});
