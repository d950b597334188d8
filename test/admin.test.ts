import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MAX_REVOKED_KEYS_KEPT } from '../src/db/sql/api-keys.ts';
import { isWellFormedApiKey } from '../src/domain/api-key-format.ts';
import { startTestService, type TestService } from './helpers/service.ts';

describe('admin API', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService();
  });
  after(() => svc.close());

  test('creating an organization returns its id, a working key and a webhook secret, once', async () => {
    const res = await svc.call({
      method: 'POST',
      url: '/api/admin/organizations',
      admin: true,
      body: { name: 'Acme' },
    });
    assert.equal(res.status, 201, res.raw);
    assert.match(res.body.organizationId, /^[0-9a-f-]{36}$/);
    assert.ok(isWellFormedApiKey(res.body.apiKey));
    assert.match(res.body.webhookSecret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    const org = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${res.body.organizationId}`,
      admin: true,
    });
    assert.equal(org.body.name, 'Acme');
    assert.equal(org.body.plan, 'free');
    assert.deepEqual(org.body.limits, {
      rateLimitPerMinute: 60,
      tasksLimit: 5,
      runsLimit: 200,
      usersLimit: 1,
      usageCreditsCents: 100,
    });
    assert.ok(!org.raw.includes(res.body.webhookSecret), 'the secret is not shown again');
  });

  test('the webhook secret and key are stored sealed or hashed, never in clear', async () => {
    const res = await svc.createOrg();
    const dump = JSON.stringify([
      await svc.testDb.db.query('SELECT * FROM organizations'),
      await svc.testDb.db.query('SELECT * FROM api_keys'),
    ]);
    assert.ok(!dump.includes(res.apiKey));
    assert.ok(!dump.includes(res.webhookSecret));
    assert.ok(!dump.includes(res.webhookSecret.slice('whsec_'.length)));
  });

  test('the operator token is required and compared exactly', async () => {
    const none = await svc.call({ method: 'GET', url: '/api/admin/organizations' });
    assert.equal(none.status, 401);
    assert.equal(none.body.error.code, 'unauthorized');
    const wrong = await svc.call({
      method: 'GET',
      url: '/api/admin/organizations',
      headers: { authorization: 'Bearer test-admin-token-0123456789abcdeX' },
    });
    assert.equal(wrong.status, 401);
    const org = await svc.createOrg();
    const key = await svc.call({ method: 'GET', url: '/api/admin/organizations', key: org.apiKey });
    assert.equal(key.status, 401, 'an organization key is not an admin token');
  });

  test('plan changes and overrides: a number sets, null removes, "unlimited" lifts the run cap', async () => {
    const { organizationId } = await svc.createOrg();
    const url = `/api/admin/organizations/${organizationId}`;
    let res = await svc.call({
      method: 'PATCH',
      url,
      admin: true,
      body: { plan: 'paid', tasksLimit: 7, runsLimit: 'unlimited' },
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.plan, 'paid');
    assert.equal(res.body.limits.tasksLimit, 7);
    assert.equal(res.body.limits.runsLimit, null);
    assert.equal(res.body.limits.rateLimitPerMinute, 300);
    res = await svc.call({ method: 'PATCH', url, admin: true, body: { plan: 'free', runsLimit: 50 } });
    assert.equal(res.body.limits.runsLimit, 50);
    assert.equal(res.body.limits.tasksLimit, 7);
    res = await svc.call({ method: 'PATCH', url, admin: true, body: { tasksLimit: null, runsLimit: null } });
    assert.equal(res.body.limits.tasksLimit, 5);
    assert.equal(res.body.limits.runsLimit, 200);
    assert.deepEqual(res.body.overrides, {});
    const bad = await svc.call({ method: 'PATCH', url, admin: true, body: { tasksLimit: -1 } });
    assert.equal(bad.status, 400);
  });

  test('unknown organizations and keys answer 404', async () => {
    const id = '00000000-0000-4000-8000-000000000000';
    assert.equal(
      (await svc.call({ method: 'GET', url: `/api/admin/organizations/${id}`, admin: true })).status,
      404,
    );
    assert.equal(
      (
        await svc.call({
          method: 'PATCH',
          url: `/api/admin/organizations/${id}`,
          admin: true,
          body: { plan: 'paid' },
        })
      ).status,
      404,
    );
    assert.equal(
      (
        await svc.call({
          method: 'POST',
          url: `/api/admin/organizations/${id}/keys`,
          admin: true,
          body: { name: 'k' },
        })
      ).status,
      404,
    );
    assert.equal(
      (await svc.call({ method: 'DELETE', url: `/api/admin/keys/${id}`, admin: true })).status,
      404,
    );
    assert.equal(
      (await svc.call({ method: 'GET', url: '/api/admin/organizations/not-a-uuid', admin: true })).status,
      400,
    );
  });

  test('a key expiry in the past is refused', async () => {
    const { organizationId } = await svc.createOrg();
    const res = await svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${organizationId}/keys`,
      admin: true,
      body: { name: 'old', expiresAt: '2001-01-01T00:00:00Z' },
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.details[0].path, '/body/expiresAt');
  });

  test('revocation is idempotent and listed with its time', async () => {
    const { organizationId } = await svc.createOrg();
    const list = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${organizationId}/keys`,
      admin: true,
    });
    const keyId = list.body[0].id;
    assert.equal(
      (await svc.call({ method: 'DELETE', url: `/api/admin/keys/${keyId}`, admin: true })).status,
      204,
    );
    const first = (
      await svc.call({ method: 'GET', url: `/api/admin/organizations/${organizationId}/keys`, admin: true })
    ).body[0].revokedAt;
    assert.ok(first);
    assert.equal(
      (await svc.call({ method: 'DELETE', url: `/api/admin/keys/${keyId}`, admin: true })).status,
      204,
    );
    const again = (
      await svc.call({ method: 'GET', url: `/api/admin/organizations/${organizationId}/keys`, admin: true })
    ).body[0].revokedAt;
    assert.equal(again, first);
  });

  /** `n` keys of the organization written straight to the database, revoked at the given times or not. */
  const insertKeys = async (organizationId: string, n: number, revokedAt?: (i: number) => Date) => {
    for (let i = 0; i < n; i++) {
      await svc.testDb.db.query(
        `INSERT INTO api_keys (id, organization_id, name, key_hash, display_prefix, revoked_at)
         VALUES (gen_random_uuid(), $1, $2, md5(random()::text) || md5(random()::text), 'svc_test_xx', $3)`,
        [organizationId, `bulk ${i}`, revokedAt?.(i) ?? null],
      );
    }
  };
  const createKey = (organizationId: string, name: string) =>
    svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${organizationId}/keys`,
      admin: true,
      body: { name },
    });

  test('an organization holds at most SVC_MAX_API_KEYS_PER_ORG keys not revoked: one more is a 403 until one is revoked', async () => {
    const { organizationId } = await svc.createOrg();
    const cap = svc.config.orgCaps.apiKeys;
    // The organization's first key, then all but one of the rest.
    await insertKeys(organizationId, cap - 2);
    assert.equal((await createKey(organizationId, 'the last one')).status, 201);
    const over = await createKey(organizationId, 'one too many');
    assert.equal(over.status, 403, over.raw);
    assert.equal(over.body.error.code, 'plan_limit_exceeded');
    assert.match(over.body.error.message, new RegExp(`at most ${cap} API keys that are not revoked`));
    const list = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${organizationId}/keys`,
      admin: true,
    });
    assert.equal(list.body.length, cap, 'nothing was written');
    const first = list.body.at(-1).id;
    assert.equal(
      (await svc.call({ method: 'DELETE', url: `/api/admin/keys/${first}`, admin: true })).status,
      204,
    );
    assert.equal((await createKey(organizationId, 'in the place of a revoked one')).status, 201);
  });

  test("a revocation keeps the organization's latest 100 revoked keys and deletes the older ones", async () => {
    const { organizationId } = await svc.createOrg();
    const other = await svc.createOrg();
    const day = (i: number) => new Date(Date.UTC(2026, 0, 1 + i));
    await insertKeys(organizationId, MAX_REVOKED_KEYS_KEPT + 5, day);
    await insertKeys(other.organizationId, 3, day);
    const list = async (id: string) =>
      (await svc.call({ method: 'GET', url: `/api/admin/organizations/${id}/keys`, admin: true })).body as {
        id: string;
        name: string;
        revokedAt: string | null;
      }[];
    const active = (await list(organizationId)).find((k) => k.revokedAt === null);
    assert.ok(active);
    assert.equal(
      (await svc.call({ method: 'DELETE', url: `/api/admin/keys/${active.id}`, admin: true })).status,
      204,
    );
    const after = await list(organizationId);
    assert.equal(after.length, MAX_REVOKED_KEYS_KEPT);
    assert.ok(
      after.some((k) => k.id === active.id),
      'the key just revoked is kept',
    );
    const names = new Set(after.map((k) => k.name));
    // The oldest revocations (days 0 to 5) are gone; the latest 99 of the bulk are kept.
    for (let i = 0; i < 6; i++) assert.ok(!names.has(`bulk ${i}`), `bulk ${i} deleted`);
    for (let i = 6; i < MAX_REVOKED_KEYS_KEPT + 5; i++) assert.ok(names.has(`bulk ${i}`), `bulk ${i} kept`);
    assert.equal((await list(other.organizationId)).length, 4, "another organization's keys are untouched");
  });

  test("an organization's first user is its owner, further users are members within usersLimit", async () => {
    const { organizationId } = await svc.createOrg();
    const url = `/api/admin/organizations/${organizationId}/users`;
    const owner = await svc.call({
      method: 'POST',
      url,
      admin: true,
      body: { email: ' Boss@Example.COM ', password: 'a long enough password', name: 'Boss' },
    });
    assert.equal(owner.status, 201, owner.raw);
    assert.deepEqual(Object.keys(owner.body).sort(), ['createdAt', 'email', 'id', 'role']);
    assert.equal(owner.body.email, 'boss@example.com');
    assert.equal(owner.body.role, 'owner');

    const body = { email: 'second@example.com', password: 'a long enough password' };
    const beyond = await svc.call({ method: 'POST', url, admin: true, body });
    assert.equal(beyond.status, 403, beyond.raw);
    assert.equal(beyond.body.error.code, 'plan_limit_exceeded');

    await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${organizationId}`,
      admin: true,
      body: { usersLimit: 3 },
    });
    const member = await svc.call({ method: 'POST', url, admin: true, body });
    assert.equal(member.status, 201, member.raw);
    assert.equal(member.body.role, 'member');
    const secondOwner = await svc.call({
      method: 'POST',
      url,
      admin: true,
      body: { email: 'third@example.com', password: 'a long enough password', role: 'owner' },
    });
    assert.equal(secondOwner.body.role, 'owner');

    const list = await svc.call({ method: 'GET', url, admin: true });
    assert.equal(list.status, 200, list.raw);
    assert.deepEqual(
      list.body.map((u: { email: string; role: string }) => [u.email, u.role]),
      [
        ['boss@example.com', 'owner'],
        ['second@example.com', 'member'],
        ['third@example.com', 'owner'],
      ],
    );
    assert.equal(list.body[0].name, 'Boss');
    assert.equal(list.body[0].lastSignInAt, null);
    assert.ok(!list.raw.includes('scrypt') && !list.raw.includes('password'), 'no password hashes');
  });

  test('a user e-mail is unique across the service (409); bad fields are 400; unknown organizations 404', async () => {
    const a = await svc.createOrg('paid');
    const b = await svc.createOrg('paid');
    const create = (organizationId: string, body: unknown) =>
      svc.call({
        method: 'POST',
        url: `/api/admin/organizations/${organizationId}/users`,
        admin: true,
        body,
      });
    assert.equal(
      (await create(a.organizationId, { email: 'one@example.com', password: 'password-123' })).status,
      201,
    );
    const taken = await create(b.organizationId, { email: 'ONE@example.com', password: 'password-123' });
    assert.equal(taken.status, 409, taken.raw);
    assert.equal(taken.body.error.code, 'conflict');

    for (const body of [
      { email: 'two@example.com', password: 'short' },
      { email: 'not an e-mail', password: 'password-123' },
      { email: 'two@example.com', password: 'password-123', role: 'admin' },
      { email: 'two@example.com', password: 'password-123', extra: true },
    ]) {
      const res = await create(a.organizationId, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.raw}`);
      assert.ok(!res.raw.includes('password-123'), 'the password is not echoed');
    }

    const unknown = '00000000-0000-4000-8000-000000000000';
    assert.equal(
      (await create(unknown, { email: 'three@example.com', password: 'password-123' })).status,
      404,
    );
    assert.equal(
      (await svc.call({ method: 'GET', url: `/api/admin/organizations/${unknown}/users`, admin: true }))
        .status,
      404,
    );
    const anonymous = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${a.organizationId}/users`,
    });
    assert.equal(anonymous.status, 401);
  });
});

describe('admin API switched off', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService({ env: { SVC_ADMIN_TOKEN: '' } });
  });
  after(() => svc.close());

  test('without SVC_ADMIN_TOKEN the admin area does not exist (404), even with a token', async () => {
    const res = await svc.call({ method: 'GET', url: '/api/admin/organizations', admin: true });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'not_found');
  });
});
