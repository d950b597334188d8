import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { groupTable, renderEnvExample, renderOperations } from '../scripts/config-docs.ts';
import { CONFIG_GROUPS, EnvSchema } from '../src/config/schema.ts';
import { loadConfig } from '../src/config.ts';

// .env.example and the configuration tables of docs/operations.md are written from the schema
// that parses the environment; this keeps the committed files equal to what it writes.

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const RUN = 'run `npm run config-docs` and commit the result';

describe('the configuration reference is generated from the schema', () => {
  test('.env.example is what the schema writes', () => {
    assert.ok(
      read('.env.example') === renderEnvExample(),
      `.env.example differs from src/config/schema.ts: ${RUN}`,
    );
  });

  test('the configuration tables of docs/operations.md are what the schema writes', () => {
    const operations = read('docs/operations.md');
    assert.ok(
      operations === renderOperations(operations),
      `docs/operations.md differs from src/config/schema.ts: ${RUN}`,
    );
  });

  test('every variable of the schema is in exactly one table and in .env.example', () => {
    const tables = Object.keys(CONFIG_GROUPS).map((group) => groupTable(group as keyof typeof CONFIG_GROUPS));
    const example = renderEnvExample();
    for (const name of Object.keys(EnvSchema.properties)) {
      assert.equal(tables.filter((t) => t.includes(`| \`${name}\` `)).length, 1, `${name} in the tables`);
      assert.match(example, new RegExp(`^# ${name}=`, 'm'));
    }
  });

  test('a table changed by hand is put back by the generator', () => {
    const operations = read('docs/operations.md');
    const edited = operations.replace('| `PORT`', '| `PORT` (edited)');
    assert.notEqual(edited, operations);
    assert.equal(renderOperations(edited), operations);
  });

  test('docs/operations.md without a group marker is refused, naming the marker', () => {
    const operations = read('docs/operations.md').replace('<!-- config:billing:start -->', '');
    assert.throws(() => renderOperations(operations), /<!-- config:billing:start -->/);
  });
});

describe('the schema is the configuration the service reads', () => {
  test('each default the docs show is the value the service takes when the variable is unset', () => {
    const config = loadConfig({});
    const properties = EnvSchema.properties as Record<string, { default?: unknown }>;
    const dflt = (name: string) => properties[name]?.default as number;
    assert.equal(config.port, dflt('PORT'));
    assert.equal(config.host, dflt('HOST'));
    assert.equal(config.worker.leaseMs, dflt('SVC_RUN_LEASE_SECONDS') * 1000);
    assert.equal(config.http.maxConnections, dflt('SVC_HTTP_MAX_CONNECTIONS'));
    assert.equal(config.orgCaps.tasks, dflt('SVC_MAX_TASKS_PER_ORG'));
    assert.equal(config.embeddedFsync, dflt('SVC_EMBEDDED_FSYNC'));
    assert.equal(config.logLevel, dflt('SVC_LOG_LEVEL'));
    assert.equal(config.stripe.meterEventName, dflt('STRIPE_METER_EVENT_NAME'));
  });

  test('the bounds the docs show are the ones enforced, with the messages given at start', () => {
    assert.throws(() => loadConfig({ PORT: '65536' }), /PORT must be between 0 and 65535, got 65536/);
    assert.throws(() => loadConfig({ PORT: 'abc' }), /PORT must be a whole number, got "abc"/);
    assert.throws(() => loadConfig({ SVC_SIGNUP: 'maybe' }), /SVC_SIGNUP must be true or false, got "maybe"/);
    assert.throws(
      () => loadConfig({ SVC_ADMIN_TOKEN: 'short' }),
      /SVC_ADMIN_TOKEN must be at least 16 characters/,
    );
    assert.throws(
      () => loadConfig({ SVC_LOG_LEVEL: 'loud' }),
      /SVC_LOG_LEVEL must be one of fatal, error, warn/,
    );
    assert.throws(() => loadConfig({ SVC_SMTP_URL: 'http://mail' }), /SVC_SMTP_URL must use smtp: or smtps:/);
    assert.throws(() => loadConfig({ DATABASE_URL: 'not a url' }), /DATABASE_URL must be a URL/);
    assert.throws(
      () => loadConfig({ SVC_MAX_OUTPUT_CHARS: '999' }),
      /SVC_MAX_OUTPUT_CHARS must be between 1000 and 10000000, got 999/,
    );
  });

  test('SVC_OAUTH_CLIENTS names clients by provider, with or without a secret, and a bad entry stops startup without echoing a secret', () => {
    const clients = loadConfig({
      SVC_OAUTH_CLIENTS: ' github=Iv1.abc:s3cret:with:colons , linear=lin_id ',
    }).oauthClients;
    assert.deepEqual(clients.get('github'), { clientId: 'Iv1.abc', clientSecret: 's3cret:with:colons' });
    assert.deepEqual(clients.get('linear'), { clientId: 'lin_id' });
    assert.equal(loadConfig({}).oauthClients.size, 0);
    for (const bad of [
      'github',
      'git hub=id:hidden-secret',
      'github=:hidden-secret',
      'a=x,a=y:hidden-secret',
    ]) {
      assert.throws(
        () => loadConfig({ SVC_OAUTH_CLIENTS: bad }),
        (err: Error) => err.message.includes('SVC_OAUTH_CLIENTS ') && !err.message.includes('hidden-secret'),
        bad,
      );
    }
  });

  test('a URL that cannot be parsed keeps the parser error as its cause', () => {
    const error = (() => {
      try {
        loadConfig({ SVC_PUBLIC_URL: 'nope' });
      } catch (e) {
        return e as Error;
      }
      return undefined;
    })();
    assert.ok(error?.cause instanceof TypeError);
  });
});
