import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createPostgresDatabase, TEST_DATABASE_URL } from './helpers/db.ts';
import { childBaseEnv, type ServerProcess, startServerProcess } from './helpers/process.ts';
import { ADMIN_TOKEN } from './helpers/service.ts';

const CLI = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
const run = promisify(execFile);

async function svc(env: Record<string, string>, ...args: string[]) {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], {
      env: { ...childBaseEnv(), ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('the svc command line', () => {
  let env: Record<string, string>;
  let cleanup: () => Promise<void>;
  let server: ServerProcess;

  before(async () => {
    if (TEST_DATABASE_URL) {
      const db = await createPostgresDatabase();
      env = { DATABASE_URL: db.url, SVC_SECRET_KEY: randomBytes(32).toString('base64') };
      cleanup = db.drop;
    } else {
      const dir = mkdtempSync(join(tmpdir(), 'svc-cli-'));
      env = { SVC_DATA_DIR: join(dir, 'data') };
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    }
    env.SVC_ADMIN_TOKEN = ADMIN_TOKEN;
    env.SVC_CREATE_DEMO_ORG = 'false';
    const migrated = await svc(env, 'migrate');
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.match(migrated.stdout, /applied migrations 1/);
    server = await startServerProcess(env);
  });
  after(async () => {
    server.child.kill('SIGTERM');
    await server.exited;
    await cleanup();
  });

  test('org create, key create, key list and key revoke work against the running service', async () => {
    const cliEnv = { ...env, SVC_PUBLIC_URL: server.url };
    const created = await svc(cliEnv, 'org', 'create', '--name', 'Cli Co', '--plan', 'paid');
    assert.equal(created.code, 0, created.stderr);
    const org = JSON.parse(created.stdout);
    assert.match(org.apiKey, /^sats_/);

    const key = JSON.parse(
      (await svc(cliEnv, 'key', 'create', '--org', org.organizationId, '--name', 'ci')).stdout,
    );
    const status = (k: string) =>
      fetch(`${server.url}/api/svc/billing/status?organizationId=${org.organizationId}`, {
        headers: { authorization: `Bearer ${k}` },
      });
    assert.equal((await status(key.apiKey)).status, 200);

    const listed = JSON.parse((await svc(cliEnv, 'key', 'list', '--org', org.organizationId)).stdout);
    assert.deepEqual(listed.map((k: { name: string }) => k.name).sort(), ['Default key', 'ci']);
    assert.ok(!JSON.stringify(listed).includes(key.apiKey));

    const revoked = await svc(cliEnv, 'key', 'revoke', key.id);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal((await status(key.apiKey)).status, 401);

    const updated = JSON.parse(
      (
        await svc(
          cliEnv,
          'org',
          'update',
          org.organizationId,
          '--runs-limit',
          '10',
          '--tasks-limit',
          'default',
        )
      ).stdout,
    );
    assert.equal(updated.limits.runsLimit, 10);
  });

  test('user create and user list manage the users of an organization, without showing passwords', async () => {
    const cliEnv = { ...env, SVC_PUBLIC_URL: server.url };
    const org = JSON.parse(
      (await svc(cliEnv, 'org', 'create', '--name', 'People Co', '--plan', 'paid')).stdout,
    );

    const created = await svc(
      cliEnv,
      'user',
      'create',
      org.organizationId,
      '--email',
      'Lead@Example.com',
      '--password',
      'cli-password-1',
      '--name',
      'Lead',
    );
    assert.equal(created.code, 0, created.stderr);
    const lead = JSON.parse(created.stdout);
    assert.equal(lead.email, 'lead@example.com');
    assert.equal(lead.role, 'owner');

    // The password can come from standard input, off the command line.
    const fromStdin = run(
      process.execPath,
      [
        CLI,
        'user',
        'create',
        org.organizationId,
        '--email',
        'helper@example.com',
        '--password',
        '-',
        '--role',
        'member',
      ],
      { env: { ...childBaseEnv(), ...cliEnv } },
    );
    fromStdin.child.stdin?.end('cli-password-2\n');
    const helper = JSON.parse((await fromStdin).stdout);
    assert.equal(helper.role, 'member');

    const listed = await svc(cliEnv, 'user', 'list', org.organizationId);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(
      JSON.parse(listed.stdout).map((u: { email: string; role: string }) => `${u.email} ${u.role}`),
      ['lead@example.com owner', 'helper@example.com member'],
    );
    assert.ok(!listed.stdout.includes('cli-password') && !listed.stdout.includes('scrypt'));

    const taken = await svc(
      cliEnv,
      'user',
      'create',
      org.organizationId,
      '--email',
      'lead@example.com',
      '--password',
      'cli-password-3',
    );
    assert.equal(taken.code, 2);
    assert.match(taken.stderr, /answered 409/);
    const badRole = await svc(
      cliEnv,
      'user',
      'create',
      org.organizationId,
      '--email',
      'x@example.com',
      '--password',
      'cli-password-4',
      '--role',
      'boss',
    );
    assert.equal(badRole.code, 2);
    assert.match(badRole.stderr, /--role must be owner or member/);
  });

  test('usage mistakes exit 2 with a message; a missing admin token is named', async () => {
    const unknown = await svc(env, 'frobnicate');
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command/);
    const noToken = await svc({ ...env, SVC_ADMIN_TOKEN: '' }, 'org', 'list');
    assert.equal(noToken.code, 2);
    assert.match(noToken.stderr, /SVC_ADMIN_TOKEN is not set/);
  });
});
