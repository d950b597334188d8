import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { EnvSchema } from '../src/config/schema.ts';
import { ROOT } from './helpers/image.ts';

// compose.yaml cannot be run here (no container engine); this reads it as Compose does (YAML
// with merge keys) and checks what `docker compose up --scale worker=N` relies on.

interface Service {
  image?: string;
  build?: unknown;
  env_file?: string | string[];
  environment?: Record<string, string>;
  ports?: string[];
  container_name?: string;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  stop_grace_period?: string;
  volumes?: string[];
}

const compose = parse(readFileSync(join(ROOT, 'compose.yaml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
};
const ROLES = ['api', 'scheduler', 'worker'] as const;
const svc = (name: string): Service => {
  const service = compose.services[name];
  assert.ok(service, `service ${name}`);
  return service;
};

describe('compose.yaml', () => {
  test('runs PostgreSQL and one service per role, each with its SVC_ROLE, all on one DATABASE_URL', () => {
    assert.deepEqual(Object.keys(compose.services).sort(), ['api', 'postgres', 'scheduler', 'worker']);
    for (const role of ROLES) assert.equal(svc(role).environment?.SVC_ROLE, role);
    const urls = new Set(ROLES.map((role) => svc(role).environment?.DATABASE_URL));
    assert.equal(urls.size, 1);
    assert.match([...urls][0] ?? '', /^postgres:\/\/svc:\$\{POSTGRES_PASSWORD:\?[^}]*\}@postgres:5432\/svc$/);
    assert.equal(svc('postgres').environment?.POSTGRES_USER, 'svc');
    assert.equal(svc('postgres').environment?.POSTGRES_DB, 'svc');
  });

  test('the roles are built from the Dockerfile, listen on every interface and wait for a healthy database', () => {
    for (const role of ROLES) {
      const service = svc(role);
      assert.equal(service.build, '.');
      assert.equal(service.environment?.HOST, '0.0.0.0');
      assert.deepEqual(service.depends_on, { postgres: { condition: 'service_healthy' } });
      assert.ok(Number.parseInt(service.stop_grace_period ?? '0', 10) >= 40, 'shutdown grace plus 10 s');
    }
    assert.deepEqual(svc('postgres').healthcheck?.test.slice(0, 2), ['CMD', 'pg_isready']);
    assert.ok(
      svc('postgres').volumes?.some((v) => v.startsWith('pgdata:')),
      'the database is kept in a volume',
    );
  });

  test('only the api publishes a port and no service has a fixed name, so --scale worker=N starts N workers', () => {
    assert.deepEqual(svc('api').ports, ['8787:8787']);
    for (const name of ['scheduler', 'worker', 'postgres']) assert.equal(svc(name).ports, undefined, name);
    for (const name of Object.keys(compose.services)) assert.equal(svc(name).container_name, undefined, name);
  });

  test('secrets come from the .env file the operator writes, never from compose.yaml itself', () => {
    for (const role of ROLES) {
      assert.equal(svc(role).env_file, '.env');
      assert.match(svc(role).environment?.SVC_SECRET_KEY ?? '', /^\$\{SVC_SECRET_KEY:\?/);
    }
    assert.match(svc('postgres').environment?.POSTGRES_PASSWORD ?? '', /^\$\{POSTGRES_PASSWORD:\?/);
    const text = readFileSync(join(ROOT, 'compose.yaml'), 'utf8');
    assert.doesNotMatch(text, /^\s*(SVC_ADMIN_TOKEN|SVC_MODEL_API_KEY|STRIPE_SECRET_KEY)\s*:/m);
  });

  test('every variable it sets for the service is one the service reads', () => {
    const names = new Set(ROLES.flatMap((role) => Object.keys(svc(role).environment ?? {})));
    assert.deepEqual(
      [...names].filter((name) => !(name in EnvSchema.properties)),
      [],
    );
  });
});
