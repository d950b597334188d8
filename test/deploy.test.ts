import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { isBuiltin } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EnvSchema } from '../src/config/schema.ts';
import {
  contextCopies,
  copyContext,
  dockerfileInstructions,
  dockerignorePatterns,
  envPairs,
  execForm,
  keptByDockerignore,
  lockPackages,
  olderNodes,
  pruneProductionDependencies,
  ROOT,
} from './helpers/image.ts';
import { waitFor } from './helpers/wait.ts';

// The Dockerfile cannot be built here (no container engine, no registry for the base image), so
// this file checks its recipe and does its steps on this machine: the files it copies (as
// .dockerignore leaves them), the production dependencies alone (pruned from node_modules by the
// lock file; with DEPLOY_TEST_INSTALL=1, as .ci/run sets it, installed by `npm ci --omit=dev`
// from the registry instead), then its command with its environment, as a user who cannot
// write the code, and its health check.

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string };
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
};
const instructions = dockerfileInstructions(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
const lastStage = Math.max(...instructions.map((i) => i.stage));
const final = (keyword: string) => instructions.filter((i) => i.stage === lastStage && i.keyword === keyword);
const imageEnv: Record<string, string> = Object.assign({}, ...final('ENV').map((i) => envPairs(i.args)));
const cmd = execForm(final('CMD')[0]?.args ?? '');
const healthcheck = execForm(final('HEALTHCHECK')[0]?.args ?? '');
const NEEDED_MAJOR = Number(
  /const NEEDED_MAJOR = (\d+);/.exec(readFileSync(join(ROOT, 'src/start.mjs'), 'utf8'))?.[1],
);

describe('the Dockerfile and .dockerignore', () => {
  test('both stages build on the Node.js slim image of the version the project needs', () => {
    const bases = instructions.filter((i) => i.keyword === 'FROM').map((i) => i.args.split(' ')[0]);
    assert.equal(bases.length, 2, 'two stages');
    assert.deepEqual(bases, [`node:${NEEDED_MAJOR}-slim`, `node:${NEEDED_MAJOR}-slim`]);
    assert.equal(pkg.engines.node, `>=${NEEDED_MAJOR}`);
    assert.equal(readFileSync(join(ROOT, '.nvmrc'), 'utf8').trim(), String(NEEDED_MAJOR));
  });

  test('the image gets the production dependencies of the lock file only, and runs as a user other than root', () => {
    const installs = instructions.filter((i) => i.stage === 0 && i.keyword === 'RUN').map((i) => i.args);
    assert.ok(
      installs.some((run) => /\bnpm ci --omit=dev\b/.test(run)),
      'the first stage runs npm ci --omit=dev',
    );
    assert.deepEqual(
      final('COPY')
        .filter((i) => i.args.startsWith('--from'))
        .map((i) => i.args),
      ['--from=deps /app/node_modules ./node_modules'],
    );
    const user = final('USER')[0]?.args;
    assert.ok(user && !['root', '0'].includes(user.split(':')[0] as string), `USER ${user}`);
  });

  test('the command is what npm start runs, with its environment, listening on every interface, with the data in the volume', () => {
    // npm start: `NAME=value … node …`; the image sets the same variables with ENV.
    const start = /^((?:[A-Z_]+=\S+ )*)(node .*)$/.exec(pkg.scripts.start ?? '');
    assert.ok(start, pkg.scripts.start);
    assert.equal(start[2], cmd.join(' '));
    const startEnv = envPairs((start[1] ?? '').trim());
    assert.deepEqual(Object.keys(startEnv), ['MALLOC_ARENA_MAX']);
    for (const [name, value] of Object.entries(startEnv)) assert.equal(imageEnv[name], value, name);
    assert.equal(imageEnv.HOST, '0.0.0.0');
    const volumes = final('VOLUME').flatMap((i) => execForm(i.args));
    assert.deepEqual(volumes, [imageEnv.SVC_DATA_DIR]);
    // Besides the service's own: Node's mode, and glibc's arenas (docs/operations.md, Sizing).
    const unknown = Object.keys(imageEnv).filter(
      (name) => !['NODE_ENV', 'MALLOC_ARENA_MAX'].includes(name) && !(name in EnvSchema.properties),
    );
    assert.deepEqual(unknown, [], 'ENV sets only variables the service reads');
  });

  test('.dockerignore keeps every file the image copies and leaves out secrets, data, node_modules and tests', () => {
    const patterns = dockerignorePatterns();
    const sources = contextCopies(instructions).flatMap((c) => c.sources);
    assert.deepEqual(sources.toSorted(), ['migrations', 'package-lock.json', 'package.json', 'src'].sort());
    for (const kept of ['package.json', 'src/start.mjs', 'src/main.ts', 'src/domain/models-catalog.json'])
      assert.ok(keptByDockerignore(patterns, kept), `${kept} is in the build context`);
    for (const left of [
      '.env',
      'data/secret.key',
      'node_modules/fastify/package.json',
      'test/deploy.test.ts',
      '.git/HEAD',
    ])
      assert.ok(!keptByDockerignore(patterns, left), `${left} is not in the build context`);
  });
});

/** The packages that `from '…'`, `import '…'` and `import('…')` load at run time (not `import type`). */
function runtimeImports(source: string): string[] {
  const statements = source.matchAll(/^(?:import|export)(\s+type\s)?[^'"]*?\sfrom\s+['"]([^'"]+)['"]/gm);
  const bare = source.matchAll(/^import\s+['"]([^'"]+)['"]/gm);
  const dynamic = source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g);
  return [
    ...[...statements].filter((m) => !m[1]).map((m) => m[2] as string),
    ...[...bare, ...dynamic].map((m) => m[1] as string),
  ];
}

describe('the production install', () => {
  test('every package the sources import at run time is a dependency (not a dev dependency) or a Node.js builtin', () => {
    const files = readdirSync(join(ROOT, 'src'), { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && /\.(ts|mjs)$/.test(entry.name))
      .map((entry) => join(entry.parentPath, entry.name));
    const packages = new Set<string>();
    for (const file of files)
      for (const specifier of runtimeImports(readFileSync(file, 'utf8'))) {
        if (specifier.startsWith('.') || isBuiltin(specifier)) continue;
        const parts = specifier.split('/');
        packages.add(specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string));
      }
    assert.ok(packages.has('fastify') && packages.has('pg'), 'the imports are found');
    assert.deepEqual(
      [...packages].filter((name) => !(name in pkg.dependencies)),
      [],
      'imported at run time but not in dependencies',
    );
  });

  test('the lock file records every optional dependency of its packages, all platforms, so npm ci accepts it', () => {
    const lock = lockPackages();
    const missing: string[] = [];
    for (const [key, entry] of Object.entries(lock))
      for (const name of Object.keys(entry.optionalDependencies ?? {})) {
        // Node's lookup: node_modules/<name> beside the package, then in each directory above it.
        const dirs = key
          .split('/node_modules/')
          .map((_, i, all) => all.slice(0, i + 1).join('/node_modules/'));
        const found = [...dirs.reverse(), ''].some(
          (dir) => `${dir}${dir ? '/' : ''}node_modules/${name}` in lock,
        );
        if (!found) missing.push(`${name} (of ${key || 'the project'})`);
      }
    assert.deepEqual(missing, []);
  });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  assert.ok(address && typeof address === 'object');
  return address.port;
}

/** The files below `dir`, relative to it. */
const tree = (dir: string) =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();

describe("the image's steps on this machine", () => {
  const tmp = mkdtempSync(join(tmpdir(), 'svc-image-'));
  const app = join(tmp, 'app');
  const volume = join(tmp, 'volume');
  // Run as root (CI), the service runs as nobody, as the image runs it as `node`: a user that
  // owns the data volume and cannot write the code.
  const asRoot = process.getuid?.() === 0;
  const env: Record<string, string> = {};
  let child: ChildProcess;
  let stderr = '';
  let exited: Promise<number | null>;
  let codeFiles: string[];

  before(async () => {
    chmodSync(tmp, 0o755);
    mkdirSync(app);
    copyContext(instructions, app);
    if (process.env.DEPLOY_TEST_INSTALL === '1') {
      const install = spawnSync('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund'], {
        cwd: app,
        encoding: 'utf8',
      });
      assert.equal(install.status, 0, `npm ci --omit=dev: ${install.stderr}`);
    } else pruneProductionDependencies(app);
    codeFiles = tree(app);
    mkdirSync(volume, { mode: 0o700 });
    if (asRoot) chownSync(volume, 65534, 65534);
    // The image's environment, its volume at a directory of this machine, and a free port.
    Object.assign(env, { PATH: process.env.PATH ?? '', ...imageEnv, SVC_DATA_DIR: volume });
    env.PORT = String(await freePort());
    env.SVC_LOG_LEVEL = 'warn';
    assert.equal(cmd[0], 'node');
    child = spawn(process.execPath, cmd.slice(1), {
      cwd: app,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
      ...(asRoot && { uid: 65534, gid: 65534 }),
    });
    child.stderr?.on('data', (d) => {
      stderr += d;
    });
    exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  });
  after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  });

  const healthcheckExit = () =>
    spawnSync(process.execPath, healthcheck.slice(1), {
      env: { PATH: env.PATH, PORT: env.PORT },
      timeout: 10_000,
    }).status;

  test("the service starts as the image's command starts it and answers /healthz and /readyz", async () => {
    const base = `http://127.0.0.1:${env.PORT}`;
    await waitFor(
      'the service to answer /healthz',
      async () => {
        if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}: ${stderr}`);
        return (await fetch(`${base}/healthz`).catch(() => undefined))?.status === 200 ? true : undefined;
      },
      { timeoutMs: 60_000, everyMs: 100 },
    );
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 200);
    assert.ok(existsSync(join(volume, 'secret.key')), 'the embedded database and its key are in the volume');
  });

  test("the image's HEALTHCHECK command exits 0 while the service runs", () => {
    assert.equal(healthcheck[0], 'node');
    assert.equal(healthcheckExit(), 0);
  });

  test('SIGTERM stops it with exit code 0, the code untouched; then the HEALTHCHECK command fails', async () => {
    child.kill('SIGTERM');
    assert.equal(await exited, 0, stderr);
    assert.deepEqual(tree(app), codeFiles, 'the service wrote nothing beside its code');
    assert.notEqual(healthcheckExit(), 0);
  });

  test(`on a Node.js older than ${NEEDED_MAJOR}, the command and npm start stop with one line naming the version needed`, (t) => {
    const older = olderNodes(NEEDED_MAJOR)[0];
    if (!older) {
      t.skip(`no Node.js older than ${NEEDED_MAJOR} on this machine`);
      return;
    }
    const version = spawnSync(older, ['--version'], { encoding: 'utf8' }).stdout.trim().slice(1);
    const line = `svc: cannot start: this service needs Node.js ${NEEDED_MAJOR} or newer (found ${version})`;
    const direct = spawnSync(older, cmd.slice(1), { cwd: app, env: { PATH: env.PATH }, encoding: 'utf8' });
    assert.equal(direct.status, 1);
    assert.equal(direct.stdout, '');
    assert.equal(direct.stderr.split('\n').length, 2, `one line: ${direct.stderr}`);
    assert.ok(direct.stderr.startsWith(line), direct.stderr);
    // npm start in the production install: the project's own Node.js is not there, so npm
    // scripts run the first `node` on PATH.
    const path = `${join(older, '..')}:${env.PATH}`;
    const npm = spawnSync('npm', ['start'], {
      cwd: app,
      env: { PATH: path, HOME: tmp, npm_config_update_notifier: 'false' },
      encoding: 'utf8',
    });
    if (npm.error) return;
    assert.equal(npm.status, 1, npm.stderr);
    assert.ok(npm.stderr.startsWith(line), npm.stderr);
    assert.equal(npm.stderr.trim().split('\n').length, 1, `one line: ${npm.stderr}`);
  });
});
