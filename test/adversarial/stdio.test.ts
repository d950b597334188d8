// Adversarial: stdio MCP sources. The allowlist holds at creation and again at run time, a
// command is never run through a shell (metacharacters in arguments arrive as plain strings),
// the server's environment is exactly its config.env plus a fixed PATH, HOME and LANG, a PATH
// in config.env cannot swap the allowed program, and a server that never answers is killed, with whatever it
// started, when the connect time limit passes.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { outboundFetch } from '../../src/lib/outbound.ts';
import { connectSource } from '../../src/runner/tools/connect.ts';
import type { ConnectOptions, SourceToConnect } from '../../src/runner/tools/types.ts';
import type { ModelReply, ModelRequest, ModelServer } from '../helpers/model-server.ts';
import {
  create,
  finishedRun,
  newTask,
  type Org,
  runNow,
  startWorkerService,
  unlimited,
} from '../helpers/runs.ts';
import type { TestService } from '../helpers/service.ts';
import { waitFor } from '../helpers/wait.ts';

const SERVICE_CANARY = `service-env-canary-${randomUUID()}`;
const NODE_DIR = dirname(process.execPath);
/** The PATH a server gets when its config.env sets none. */
const FIXED_PATH = `${NODE_DIR}:/usr/local/bin:/usr/bin:/bin`;

const scratch = mkdtempSync(join(tmpdir(), 'svc-adv-stdio-'));
// Writable by anyone: servers of a root service run as another user, who must be able to leave
// the marker here if a shell ever ran, or the checks for it would prove nothing.
chmodSync(scratch, 0o777);
/** A file that any shell interpretation of the test's strings would create. */
const marker = join(scratch, 'pwned');

/** An MCP server (the official SDK) that reports its argv, environment and executable. */
const ECHO_SERVER = `
  import { McpServer } from ${JSON.stringify(import.meta.resolve('@modelcontextprotocol/sdk/server/mcp.js'))};
  import { StdioServerTransport } from ${JSON.stringify(import.meta.resolve('@modelcontextprotocol/sdk/server/stdio.js'))};
  const server = new McpServer({ name: 'echo', version: '1.0.0' });
  const report = (value) => async () => ({ content: [{ type: 'text', text: JSON.stringify(value()) }] });
  server.registerTool('argv', { description: 'Its arguments' }, report(() => process.argv.slice(1)));
  server.registerTool('env', { description: 'Its environment' }, report(() => process.env));
  server.registerTool('exec_path', { description: 'Its executable' }, report(() => process.execPath));
  await server.connect(new StdioServerTransport());
`;
const echoArgs = (...extra: string[]) => ['--input-type=module', '-e', ECHO_SERVER, '--', ...extra];

/** Arguments a shell would act on: each, if interpreted, creates the marker file. */
const HOSTILE_ARGS = [
  `; touch ${marker}`,
  `$(touch ${marker})`,
  `\`touch ${marker}\``,
  `| touch ${marker}`,
  `&& touch ${marker}`,
  `|| touch ${marker}`,
  `> ${marker}`,
  `a\ntouch ${marker}`,
  `'; touch ${marker}; '`,
  `"; touch ${marker}; "`,
  '/etc/host*',
  '~',
  '$HOME',
  `\${IFS}`,
  `--require=${marker}`,
];

/**
 * `calls <json [{tool, args}]>`: makes those calls at once (tools matched by their own name),
 * then answers with the JSON list of their results.
 */
function script(prompt: string, request: ModelRequest): ModelReply {
  const list = /^calls (.*)$/s.exec(prompt)?.[1];
  if (!list) return {};
  const results = request.body.messages.filter((m) => m.role === 'tool');
  if (results.length > 0) return { content: JSON.stringify(results.map((m) => m.content)) };
  const offered = request.body.tools?.map((t) => t.function.name) ?? [];
  return {
    toolCalls: (JSON.parse(list) as { tool: string; args?: unknown }[]).map(({ tool, args }) => ({
      name: offered.find((n) => n === tool || n.endsWith(`__${tool}`)) ?? tool,
      arguments: args ?? {},
    })),
  };
}

const isGone = (pid: number) => {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
};

describe('stdio sources under attack', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;

  before(async () => {
    // Set on the service's own process: no stdio server may see it.
    process.env.SVC_STDIO_SERVICE_CANARY = SERVICE_CANARY;
    ({ svc, model } = await startWorkerService((prompt, _i, request) => script(prompt, request), {
      SVC_STDIO_COMMANDS: 'node[GREETING,A_SECRET,B_SECRET,PATH]',
      PATH: NODE_DIR,
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    delete process.env.SVC_STDIO_SERVICE_CANARY;
    await svc?.close();
    await model?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const createSource = (config: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    svc.call({
      method: 'POST',
      url: '/api/svc/sources',
      key: org.apiKey,
      body: {
        organizationId: org.organizationId,
        type: 'mcp',
        name: `stdio ${randomUUID()}`,
        config,
        ...extra,
      },
    });

  async function run(prompt: string, sourceIds: string[]) {
    const task = await newTask(svc, org, { prompt, sourceIds });
    return { task, run: await finishedRun(svc, org, await runNow(svc, org, task.id), 30_000) };
  }

  test('a command that is not exactly an allowlisted one is refused when the source is saved', async () => {
    const refused = [
      'sh',
      'bash',
      '/bin/sh',
      'env',
      'npx',
      process.execPath, // the allowed program, but not under its allowed name
      './node',
      '../bin/node',
      'NODE',
      'node;',
      `node; touch ${marker}`,
      `node && touch ${marker}`,
      `node | touch ${marker}`,
      `$(touch ${marker})`,
      `\`touch ${marker}\``,
      `node\ntouch ${marker}`,
      'node*',
    ];
    for (const command of refused) {
      const res = await createSource({ transport: 'stdio', command, args: [] });
      assert.equal(res.status, 400, `${JSON.stringify(command)}: ${res.raw}`);
      assert.match(res.body.error.message, /SVC_STDIO_COMMANDS/, command);
    }
    const allowed = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Allowed then patched',
      config: { transport: 'stdio', command: 'node', args: echoArgs() },
    });
    const patched = await svc.call({
      method: 'PATCH',
      url: `/api/svc/sources/${allowed.id}`,
      key: org.apiKey,
      body: { config: { transport: 'stdio', command: 'sh', args: ['-c', `touch ${marker}`] } },
    });
    assert.equal(patched.status, 400, patched.raw);
    assert.equal(existsSync(marker), false, 'nothing ran');
  });

  test('a stored command off the allowlist is refused at run time, before the model is asked', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Tampered',
      config: { transport: 'stdio', command: 'node', args: echoArgs() },
    });
    // As if written past the API (or allowed once and since removed from SVC_STDIO_COMMANDS).
    await svc.testDb.db.query(`UPDATE sources SET config = $2::jsonb WHERE id = $1`, [
      source.id,
      JSON.stringify({ transport: 'stdio', command: 'sh', args: ['-c', `touch ${marker}`] }),
    ]);
    const { task, run: result } = await run('calls []', [source.id]);
    assert.equal(result.status, 'failed');
    assert.match(result.error, /"Tampered".*command "sh" is not one of the commands.*SVC_STDIO_COMMANDS/);
    assert.equal(
      model.requests.filter((r) => r.body.messages.some((m) => m.content === task.prompt)).length,
      0,
      'no model call',
    );
    const tested = await svc.call({
      method: 'POST',
      url: `/api/svc/sources/${source.id}/test`,
      key: org.apiKey,
    });
    assert.equal(tested.body.success, false);
    assert.equal(existsSync(marker), false, 'nothing ran');
  });

  test('config.env variables that make a program load other code are refused when the source is saved', async () => {
    const importMarker = `--import=data:text/javascript,import fs from 'node:fs'; fs.writeFileSync(${JSON.stringify(marker)}, 'x')`;
    for (const [name, value] of [
      ['NODE_OPTIONS', importMarker],
      ['node_options', importMarker],
      ['LD_PRELOAD', '/tmp/evil.so'],
      ['LD_LIBRARY_PATH', '/tmp'],
      ['PYTHONPATH', '/tmp'],
      ['BASH_ENV', '/tmp/evil.sh'],
      ['PERL5OPT', '-Mevil'],
    ] as const) {
      const res = await createSource({
        transport: 'stdio',
        command: 'node',
        args: echoArgs(),
        env: { [name]: value },
      });
      assert.equal(res.status, 400, `${name}: ${res.raw}`);
      assert.equal(res.body.error.details[0].path, `/body/config/env/${name}`);
      assert.match(res.body.error.details[0].message, /load other code/);
    }
    const fine = await createSource({
      transport: 'stdio',
      command: 'node',
      args: echoArgs(),
      env: { GREETING: 'hi' },
    });
    assert.equal(fine.status, 201, fine.raw);
    assert.equal(existsSync(marker), false, 'nothing ran');
  });

  test('shell metacharacters in arguments reach the server as literal strings, at test and at run', async () => {
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Echo',
      slug: 'echo',
      config: { transport: 'stdio', command: 'node', args: echoArgs(...HOSTILE_ARGS) },
    });
    const tested = await svc.call({
      method: 'POST',
      url: `/api/svc/sources/${source.id}/test`,
      key: org.apiKey,
    });
    assert.equal(tested.body.success, true, tested.body.message);
    assert.deepEqual(tested.body.tools.map((t: { name: string }) => t.name).sort(), [
      'argv',
      'env',
      'exec_path',
    ]);
    const { run: result } = await run('calls [{"tool":"argv"}]', [source.id]);
    assert.equal(result.status, 'completed', result.error);
    const [argv] = JSON.parse(result.output) as string[];
    assert.deepEqual(JSON.parse(argv ?? 'null'), HOSTILE_ARGS);
    assert.equal(existsSync(marker), false, 'no shell ever saw the arguments');
  });

  test("each server's environment is exactly its own config.env and a fixed PATH, HOME and LANG", async () => {
    const a = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Env A',
      slug: 'env-a',
      config: {
        transport: 'stdio',
        command: 'node',
        args: echoArgs(),
        env: { A_SECRET: 'a-env-secret-value' },
      },
      authType: 'bearer',
      authConfig: { token: 'a-credential-token-value' },
    });
    const b = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Env B',
      slug: 'env-b',
      config: {
        transport: 'stdio',
        command: 'node',
        args: echoArgs(),
        env: { B_SECRET: 'b-env-secret-value' },
      },
    });
    const { run: result } = await run('calls [{"tool":"env-a__env"},{"tool":"env-b__env"}]', [a.id, b.id]);
    assert.equal(result.status, 'completed', result.error);
    const [envA, envB] = (JSON.parse(result.output) as string[]).map((text) => JSON.parse(text));
    // Not the service's variables (its canary, HOME, its PATH, anything), not the source's
    // credentials, not the other source's env.
    const fixed = { PATH: FIXED_PATH, LANG: 'C.UTF-8' };
    assert.deepEqual(
      { ...envA, HOME: undefined },
      { A_SECRET: 'a-env-secret-value', ...fixed, HOME: undefined },
    );
    assert.deepEqual(
      { ...envB, HOME: undefined },
      { B_SECRET: 'b-env-secret-value', ...fixed, HOME: undefined },
    );
    // HOME is each server's own empty directory.
    assert.match(envA.HOME, /svc-mcp-/);
    assert.notEqual(envA.HOME, envB.HOME);
    assert.ok(!result.output.includes(SERVICE_CANARY));
  });

  test('a PATH in config.env does not change which program the allowed command runs', async () => {
    // A directory whose `node` would create the marker.
    const dir = mkdtempSync(join(scratch, 'bin-'));
    writeFileSync(join(dir, 'node'), `#!/bin/sh\ntouch ${marker}\n`);
    chmodSync(join(dir, 'node'), 0o755);
    const source = await create(svc, org, 'sources', {
      type: 'mcp',
      name: 'Decoy PATH',
      config: { transport: 'stdio', command: 'node', args: echoArgs(), env: { PATH: dir } },
    });
    const { run: result } = await run('calls [{"tool":"exec_path"}]', [source.id]);
    assert.equal(result.status, 'completed', result.error);
    const [execPath] = JSON.parse(result.output) as string[];
    assert.equal(JSON.parse(execPath ?? 'null'), process.execPath, "the service's node, not the decoy");
    assert.equal(existsSync(marker), false);
  });

  test('a server that never answers is killed with what it started when the connect time limit passes', async () => {
    const pidFile = join(scratch, `pids-${randomUUID()}`);
    // Writes its pid and a child's, ignores SIGTERM (so only SIGKILL ends it) and never speaks.
    const silent = `
      const { spawn } = require('node:child_process');
      const { writeFileSync } = require('node:fs');
      process.on('SIGTERM', () => {});
      const child = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"], { stdio: 'ignore' });
      writeFileSync(process.argv[1], JSON.stringify([process.pid, child.pid]));
      setInterval(() => {}, 1000);
    `;
    const source: SourceToConnect = {
      id: randomUUID(),
      slug: 'silent',
      name: 'Silent',
      type: 'mcp',
      config: { transport: 'stdio', command: 'node', args: ['-e', silent, pidFile] },
      authType: null,
      authConfig: null,
      secrets: { env: {}, credentials: {} },
    };
    const options: ConnectOptions = {
      config: { stdioCommands: ['node'], stdioSearchPath: NODE_DIR, allowPrivateUrls: false },
      fetch: outboundFetch({ allowPrivateUrls: false }),
      // The limit runs and source tests use is 15 s; the same code path with a shorter one.
      timeoutMs: 3000,
      signal: new AbortController().signal,
    };
    const result = await connectSource(source, options);
    assert.equal(result.ok, false);
    assert.equal(!result.ok && result.errorType, 'timeout');
    assert.ok(existsSync(pidFile), 'the server started and wrote its pids before the limit');
    const pids = JSON.parse(readFileSync(pidFile, 'utf8')) as number[];
    assert.equal(pids.length, 2);
    for (const pid of pids) {
      assert.ok(pid > 0);
      await waitFor(`process ${pid} to be killed`, async () => (isGone(pid) ? true : undefined));
    }
  });
});
