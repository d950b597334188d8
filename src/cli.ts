#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { type Config, loadConfig } from './config.ts';
import { migrate } from './db/migrate.ts';
import { openDb } from './db/open.ts';
import { runServer } from './run-server.ts';
import { failStartup } from './startup-error.ts';

const USAGE = `svc: the scheduled AI task service

  svc start [--role all|api|scheduler|worker]   run the service (configuration from the environment)
  svc migrate                                   apply pending database migrations and exit

Operator commands call the admin API of a running service at SVC_PUBLIC_URL
(default http://HOST:PORT; override with --url) with SVC_ADMIN_TOKEN:

  svc org create --name NAME [--plan free|paid]
  svc org list
  svc org update ORG_ID [--plan free|paid] [--rate-limit N|default] [--tasks-limit N|default]
                        [--runs-limit N|unlimited|default] [--users-limit N|default]
  svc key create --org ORG_ID --name NAME [--expires-at ISO-8601]
  svc key list --org ORG_ID
  svc key revoke KEY_ID
  svc user create ORG_ID --email EMAIL --password PASSWORD|- [--name NAME] [--role owner|member]
                        (--password - reads the password from the first line of standard input)
  svc user list ORG_ID
`;

class UsageError extends Error {}

function limitValue(
  raw: string | undefined,
  allowUnlimited = false,
): number | 'unlimited' | null | undefined {
  if (raw === undefined) return undefined;
  if (raw === 'default') return null;
  if (allowUnlimited && raw === 'unlimited') return 'unlimited';
  if (!/^\d+$/.test(raw)) throw new UsageError(`expected a whole number or "default", got "${raw}"`);
  return Number(raw);
}

async function admin(config: Config, url: string | undefined, method: string, path: string, body?: unknown) {
  if (!config.adminToken) throw new UsageError('SVC_ADMIN_TOKEN is not set; the admin API needs it');
  const base = (url ?? config.publicUrl).replace(/\/+$/, '');
  let res: Response;
  try {
    res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${config.adminToken}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  } catch (err) {
    throw new UsageError(
      `cannot reach the service at ${base}: ${(err as Error).cause ?? (err as Error).message}`,
      { cause: err },
    );
  }
  const text = await res.text();
  if (!res.ok) {
    let message = text;
    try {
      const parsed = JSON.parse(text) as { error?: { message?: string } };
      message = parsed.error?.message ?? text;
    } catch {}
    throw new UsageError(`${method} ${path} answered ${res.status}: ${message}`);
  }
  return text ? (JSON.parse(text) as unknown) : null;
}

/** The first line of a stream (without its line ending), for secrets kept off the command line. */
async function readFirstLine(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) {
    text += String(chunk);
    if (text.includes('\n')) break;
  }
  return text.split(/\r?\n/)[0] ?? '';
}

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
};

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      role: { type: 'string' },
      name: { type: 'string' },
      plan: { type: 'string' },
      org: { type: 'string' },
      url: { type: 'string' },
      'expires-at': { type: 'string' },
      'rate-limit': { type: 'string' },
      'tasks-limit': { type: 'string' },
      'runs-limit': { type: 'string' },
      'users-limit': { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, sub, arg] = positionals;
  if (values.help || !command) {
    process.stdout.write(USAGE);
    return;
  }
  // --role is the process role for `start`; for `user create` it is the user's role.
  const env = { ...process.env, ...(command === 'start' && values.role && { SVC_ROLE: values.role }) };
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    failStartup(err);
  }

  switch (`${command} ${sub ?? ''}`.trim()) {
    case 'start':
      try {
        await runServer(config);
      } catch (err) {
        failStartup(err);
      }
      return;
    case 'migrate': {
      const db = await openDb(config, () => undefined);
      try {
        const applied = await migrate(db);
        process.stdout.write(applied.length ? `applied migrations ${applied.join(', ')}\n` : 'up to date\n');
      } finally {
        await db.close();
      }
      return;
    }
    case 'org create':
      if (!values.name) throw new UsageError('--name is required');
      return print(
        await admin(config, values.url, 'POST', '/api/admin/organizations', {
          name: values.name,
          ...(values.plan && { plan: values.plan }),
        }),
      );
    case 'org list':
      return print(await admin(config, values.url, 'GET', '/api/admin/organizations'));
    case 'org update': {
      if (!arg) throw new UsageError('the organization id is required');
      const patch: Record<string, unknown> = {};
      if (values.plan) patch.plan = values.plan;
      const fields: [string, string | undefined, boolean][] = [
        ['rateLimitPerMinute', values['rate-limit'], false],
        ['tasksLimit', values['tasks-limit'], false],
        ['runsLimit', values['runs-limit'], true],
        ['usersLimit', values['users-limit'], false],
      ];
      for (const [field, raw, unlimited] of fields) {
        const v = limitValue(raw, unlimited);
        if (v !== undefined) patch[field] = v;
      }
      return print(await admin(config, values.url, 'PATCH', `/api/admin/organizations/${arg}`, patch));
    }
    case 'key create':
      if (!values.org || !values.name) throw new UsageError('--org and --name are required');
      return print(
        await admin(config, values.url, 'POST', `/api/admin/organizations/${values.org}/keys`, {
          name: values.name,
          ...(values['expires-at'] && { expiresAt: values['expires-at'] }),
        }),
      );
    case 'key list':
      if (!values.org) throw new UsageError('--org is required');
      return print(await admin(config, values.url, 'GET', `/api/admin/organizations/${values.org}/keys`));
    case 'key revoke':
      if (!arg) throw new UsageError('the key id is required');
      await admin(config, values.url, 'DELETE', `/api/admin/keys/${arg}`);
      process.stdout.write(`revoked ${arg}\n`);
      return;
    case 'user create': {
      if (!arg) throw new UsageError('the organization id is required');
      if (!values.email || !values.password) throw new UsageError('--email and --password are required');
      if (values.role && values.role !== 'owner' && values.role !== 'member') {
        throw new UsageError('--role must be owner or member');
      }
      const password = values.password === '-' ? await readFirstLine(process.stdin) : values.password;
      return print(
        await admin(config, values.url, 'POST', `/api/admin/organizations/${arg}/users`, {
          email: values.email,
          password,
          ...(values.name && { name: values.name }),
          ...(values.role && { role: values.role }),
        }),
      );
    }
    case 'user list':
      if (!arg) throw new UsageError('the organization id is required');
      return print(await admin(config, values.url, 'GET', `/api/admin/organizations/${arg}/users`));
    default:
      throw new UsageError(`unknown command "${positionals.join(' ')}"\n\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`svc: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(err instanceof UsageError ? 2 : 1);
});
