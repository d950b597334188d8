// Adversarial: what a customer's stdio source configuration can make an allowed program do.
// A deny-list of "dangerous" variables always misses a family (git reads GIT_CONFIG_COUNT /
// GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n, which can make it run a shell command), so config.env
// may hold only the names the operator allowed for the command in SVC_STDIO_COMMANDS, checked
// when saved and again when started. A server gets a fixed PATH, HOME and LANG besides, and,
// when the service runs as root, it runs as an unprivileged user: it cannot read the service's
// environment (/proc/<pid>/environ) or data directory. The git-style server runs the real git.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.ts';
import { outboundFetch } from '../../src/lib/outbound.ts';
import { connectSource } from '../../src/runner/tools/connect.ts';
import type { SourceToConnect } from '../../src/runner/tools/types.ts';
import { TEST_DATABASE_URL } from '../helpers/db.ts';
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

const NODE_DIR = dirname(process.execPath);
const PROBE_SERVER = fileURLToPath(new URL('../helpers/stdio-probe-server.ts', import.meta.url));
const isRoot = process.getuid?.() === 0;

// Writable by anyone, so that a command run as any user could leave its marker here.
const scratch = mkdtempSync(join(tmpdir(), 'svc-adv-stdio-env-'));
chmodSync(scratch, 0o777);
const marker = join(scratch, 'pwned');
/** The service's data directory, in a directory others may enter (only its own mode protects it). */
const dataDir = join(scratch, 'data');

/** Makes git run `touch <marker>` (core.fsmonitor is a command git runs through the shell). */
const GIT_ATTACK = {
  GIT_CONFIG_COUNT: '1',
  GIT_CONFIG_KEY_0: 'core.fsmonitor',
  GIT_CONFIG_VALUE_0: `touch ${marker}; false`,
};

/** `probe`: the model calls the source's probe tool and answers with what it returned. */
function script(prompt: string, request: ModelRequest): ModelReply {
  if (prompt !== 'probe') return {};
  const result = request.body.messages.find((m) => m.role === 'tool');
  if (result) return { content: String(result.content) };
  const tool = request.body.tools?.map((t) => t.function.name).find((n) => n.endsWith('probe')) ?? 'probe';
  return { toolCalls: [{ name: tool, arguments: {} }] };
}

interface Probe {
  pid: number;
  uid: number;
  gid: number;
  cwd: string;
  env: Record<string, string>;
  reach: Record<string, { ok: boolean; code?: string }>;
}

describe('stdio sources: the environment and the user a server gets', () => {
  let svc: TestService;
  let model: ModelServer;
  let org: Org;

  before(async () => {
    ({ svc, model } = await startWorkerService((prompt, _i, request) => script(prompt, request), {
      SVC_STDIO_COMMANDS: 'node[REPO_PATH]',
      PATH: NODE_DIR,
      SVC_DATA_DIR: dataDir,
      // Embedded: the service keeps its generated key in the data directory.
      ...(TEST_DATABASE_URL ? {} : { SVC_SECRET_KEY: '' }),
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc?.close();
    await model?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const probeSource = (env: Record<string, string>, name = `probe ${randomUUID()}`) => ({
    organizationId: org.organizationId,
    type: 'mcp',
    name,
    config: {
      transport: 'stdio',
      command: 'node',
      args: [PROBE_SERVER, dataDir, join(dataDir, 'secret.key')],
      env,
    },
  });

  async function probe(sourceId: string): Promise<Probe> {
    const task = await newTask(svc, org, { prompt: 'probe', sourceIds: [sourceId] });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id), 30_000);
    assert.equal(run.status, 'completed', run.error);
    return JSON.parse(run.output) as Probe;
  }

  test('config.env names the operator did not allow for the command are refused when the source is saved, git families included', async () => {
    const value = `value-${randomUUID()}`;
    for (const name of [
      'GIT_CONFIG_COUNT',
      'GIT_CONFIG_KEY_0',
      'GIT_CONFIG_VALUE_0',
      'GIT_CONFIG_PARAMETERS',
      'GIT_CONFIG_GLOBAL',
      'GIT_ASKPASS',
      'SSH_ASKPASS',
      'GIT_SSH_COMMAND',
      'GIT_EXTERNAL_DIFF',
      'EDITOR',
      'HOME',
      'PATH',
      'repo_path',
    ]) {
      const res = await svc.call({
        method: 'POST',
        url: '/api/svc/sources',
        key: org.apiKey,
        body: probeSource({ REPO_PATH: '/srv/repo', [name]: value }),
      });
      assert.equal(res.status, 400, `${name}: ${res.raw}`);
      assert.equal(res.body.error.details[0].path, `/body/config/env/${name}`);
      assert.match(res.body.error.message, /SVC_STDIO_COMMANDS|load other code/);
      assert.ok(!res.raw.includes(value), 'the value is not echoed');
    }
    const saved = await create(svc, org, 'sources', probeSource({ REPO_PATH: '/srv/repo' }));
    const patched = await svc.call({
      method: 'PATCH',
      url: `/api/svc/sources/${saved.id}`,
      key: org.apiKey,
      body: { config: { ...probeSource({ REPO_PATH: '/srv/repo', ...GIT_ATTACK }).config } },
    });
    assert.equal(patched.status, 400, patched.raw);
    assert.equal(existsSync(marker), false, 'git ran nothing');
  });

  test("a stored config.env the command's allow-list does not name is refused at start, so git never runs the customer's command", async () => {
    const source: SourceToConnect = {
      id: randomUUID(),
      slug: 'git-style',
      name: 'Git style',
      type: 'mcp',
      config: { transport: 'stdio', command: 'node', args: [PROBE_SERVER] },
      authType: null,
      authConfig: null,
      // As if saved before the rule, or allowed once and since taken off the list.
      secrets: { env: { REPO_PATH: '/srv/repo', ...GIT_ATTACK }, credentials: {} },
    };
    const connect = (config: SourceToConnectConfig) =>
      connectSource(source, {
        config,
        fetch: outboundFetch({ allowPrivateUrls: false }),
        timeoutMs: 15_000,
        signal: new AbortController().signal,
      });
    const refused = await connect(svc.config);
    assert.equal(refused.ok, false);
    assert.equal(!refused.ok && refused.errorType, 'refused');
    assert.match(!refused.ok ? refused.message : '', /GIT_CONFIG_COUNT.*SVC_STDIO_COMMANDS allows REPO_PATH/);
    assert.equal(existsSync(marker), false, "the customer's command did not run");

    // The control: an operator who allows those names gets what git does with them. This is
    // what the rule above stops, so the test would notice if the server could not do it.
    const permissive = loadConfig({
      SVC_STDIO_COMMANDS: 'node[REPO_PATH,GIT_CONFIG_COUNT,GIT_CONFIG_KEY_0,GIT_CONFIG_VALUE_0]',
      PATH: NODE_DIR,
    });
    const allowed = await connect(permissive);
    assert.equal(allowed.ok, true, !allowed.ok ? allowed.message : '');
    if (allowed.ok) await allowed.connection.close();
    assert.equal(existsSync(marker), true, 'git runs core.fsmonitor when it is given');
    rmSync(marker, { force: true });
  });

  test('a server gets a fixed PATH, its own HOME and LANG, and only the variables allowed for its command', async () => {
    const source = await create(svc, org, 'sources', probeSource({ REPO_PATH: '/srv/repo' }));
    const seen = await probe(source.id);
    assert.deepEqual(seen.env, {
      PATH: `${NODE_DIR}:/usr/local/bin:/usr/bin:/bin`,
      HOME: seen.cwd,
      LANG: 'C.UTF-8',
      REPO_PATH: '/srv/repo',
    });
    assert.match(seen.cwd, /svc-mcp-/);
  });

  test("under a root service a server runs as an unprivileged user and cannot read the service's environment or data directory", {
    skip: isRoot ? false : 'the service does not run as root here: there is no other user to switch to',
  }, async () => {
    const source = await create(svc, org, 'sources', probeSource({}));
    const seen = await probe(source.id);
    assert.notEqual(seen.uid, 0);
    assert.notEqual(seen.gid, 0);
    assert.deepEqual(svc.config.stdioUser, { uid: seen.uid, gid: seen.gid });
    const environ = Object.entries(seen.reach).find(([path]) => path.endsWith('/environ'));
    assert.deepEqual(environ?.[1], { ok: false, code: 'EACCES' }, "the service's /proc/<pid>/environ");
    if (TEST_DATABASE_URL) {
      // With PostgreSQL the service keeps nothing in a data directory.
      assert.equal(existsSync(dataDir), false);
    } else {
      assert.ok(existsSync(join(dataDir, 'secret.key')), 'the service keeps its key there');
      assert.deepEqual(seen.reach[dataDir], { ok: false, code: 'EACCES' }, 'the data directory');
      assert.deepEqual(seen.reach[join(dataDir, 'secret.key')], { ok: false, code: 'EACCES' }, 'secret.key');
    }
  });

  test("with a uid range in SVC_STDIO_USER, servers running at once get uids of their own and cannot read each other's environment", {
    skip: isRoot ? false : 'the service does not run as root here: there is no other user to switch to',
  }, async () => {
    const secret = `other-organization-token-${randomUUID()}`;
    const server = (args: string[], env: Record<string, string>): SourceToConnect => ({
      id: randomUUID(),
      slug: 'probe',
      name: 'Probe',
      type: 'mcp',
      config: { transport: 'stdio', command: 'node', args: [PROBE_SERVER, ...args] },
      authType: null,
      authConfig: null,
      secrets: { env, credentials: {} },
    });
    /** Starts a server whose environment holds the secret, then another one that tries to read it. */
    async function neighbours(user: string | undefined) {
      const config = loadConfig({
        SVC_STDIO_COMMANDS: 'node[TOKEN]',
        PATH: NODE_DIR,
        ...(user && { SVC_STDIO_USER: user }),
      });
      const open = async (source: SourceToConnect) => {
        const result = await connectSource(source, {
          config,
          fetch: outboundFetch({ allowPrivateUrls: false }),
          timeoutMs: 15_000,
          signal: new AbortController().signal,
        });
        assert.ok(result.ok, !result.ok ? result.message : '');
        const called = await result.connection.call('probe', {}, new AbortController().signal);
        assert.ok(called.ok);
        return { connection: result.connection, seen: JSON.parse(called.text) as Probe };
      };
      const victim = await open(server([], { TOKEN: secret }));
      const reader = await open(server([`/proc/${victim.seen.pid}/environ`], {}));
      await Promise.all([victim.connection.close(), reader.connection.close()]);
      return { victim: victim.seen, reader: reader.seen };
    }

    const ranged = await neighbours('200000-200999');
    for (const seen of [ranged.victim, ranged.reader]) {
      assert.ok(seen.uid >= 200000 && seen.uid <= 200999, `uid ${seen.uid} in the range`);
      assert.equal(seen.gid, seen.uid);
    }
    assert.notEqual(ranged.reader.uid, ranged.victim.uid);
    assert.deepEqual(ranged.reader.reach[`/proc/${ranged.victim.pid}/environ`], {
      ok: false,
      code: 'EACCES',
    });

    // The reason for the range: under one shared user (the default, nobody) they can.
    const shared = await neighbours(undefined);
    assert.equal(shared.reader.uid, shared.victim.uid);
    assert.equal(shared.reader.reach[`/proc/${shared.victim.pid}/environ`]?.ok, true);
  });

  test('SVC_STDIO_COMMANDS and SVC_STDIO_USER refuse what would defeat them at start', () => {
    const passwd = () =>
      'root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\nsvc:x:990:990::/:/bin/false\n';
    const load = (env: Record<string, string>, uid = 0) => loadConfig(env, { uid, passwd });
    for (const [env, problem, uid] of [
      [{ SVC_STDIO_COMMANDS: 'node[LD_PRELOAD]' }, /SVC_STDIO_COMMANDS .*LD_PRELOAD.*load other code/, 0],
      [{ SVC_STDIO_COMMANDS: 'node[NODE_OPTIONS]' }, /SVC_STDIO_COMMANDS .*NODE_OPTIONS/, 0],
      [{ SVC_STDIO_COMMANDS: 'node[A-B]' }, /SVC_STDIO_COMMANDS .*not a variable name/, 0],
      [{ SVC_STDIO_COMMANDS: 'node[A' }, /SVC_STDIO_COMMANDS cannot be read/, 0],
      [{ SVC_STDIO_COMMANDS: 'node,node[A]' }, /SVC_STDIO_COMMANDS lists "node" twice/, 0],
      [
        { SVC_STDIO_COMMANDS: 'node', SVC_STDIO_USER: 'root' },
        /SVC_STDIO_USER must be an unprivileged user/,
        0,
      ],
      [
        { SVC_STDIO_COMMANDS: 'node', SVC_STDIO_USER: '0:0' },
        /SVC_STDIO_USER must be an unprivileged user/,
        0,
      ],
      [{ SVC_STDIO_COMMANDS: 'node', SVC_STDIO_USER: 'nosuchuser' }, /SVC_STDIO_USER names no user/, 0],
      [{ SVC_STDIO_COMMANDS: 'node', SVC_STDIO_USER: '0-100' }, /SVC_STDIO_USER must be a uid range/, 0],
      [{ SVC_STDIO_COMMANDS: 'node', SVC_STDIO_USER: '300-200' }, /SVC_STDIO_USER must be a uid range/, 0],
      [
        { SVC_STDIO_COMMANDS: 'node', SVC_STDIO_USER: 'svc' },
        /SVC_STDIO_USER can only be set when the service runs as root/,
        1000,
      ],
    ] as const) {
      assert.throws(() => load(env, uid), problem, JSON.stringify(env));
    }
    const root = load({ SVC_STDIO_COMMANDS: 'node, mcp-server-git[ GITHUB_TOKEN , REPO_PATH ],npx' });
    assert.deepEqual(root.stdioCommands, ['node', 'mcp-server-git', 'npx']);
    assert.deepEqual([...(root.stdioEnv.get('mcp-server-git') ?? [])], ['GITHUB_TOKEN', 'REPO_PATH']);
    assert.deepEqual([...(root.stdioEnv.get('node') ?? [])], []);
    assert.deepEqual(root.stdioUser, { uid: 65534, gid: 65534 }, 'root defaults to nobody');
    assert.deepEqual(load({ SVC_STDIO_COMMANDS: 'node', SVC_STDIO_USER: 'svc' }).stdioUser, {
      uid: 990,
      gid: 990,
    });
    assert.deepEqual(load({ SVC_STDIO_COMMANDS: 'node', SVC_STDIO_USER: '1234:5678' }).stdioUser, {
      uid: 1234,
      gid: 5678,
    });
    assert.equal(
      load({ SVC_STDIO_COMMANDS: 'node' }, 1000).stdioUser,
      undefined,
      'a non-root service keeps its user',
    );
    assert.deepEqual(load({ SVC_STDIO_COMMANDS: 'node', SVC_STDIO_USER: '200000-265535' }).stdioUser, {
      uidRange: { first: 200000, last: 265535 },
    });
    assert.equal(load({}).stdioUser, undefined, 'no stdio commands, no user needed');
  });
});

type SourceToConnectConfig = Parameters<typeof connectSource>[1]['config'];
