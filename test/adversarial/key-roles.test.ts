// Adversarial: who may revoke which API key. In the dashboard the owner may revoke any key of
// the organization and a member only the keys they created themselves: a member cannot cut off
// the owner's programs or the keys the operator issued (admin API, CLI). The operator revokes
// any key. A refused revocation changes nothing: the key still opens the API.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { signIn } from '../../src/domain/sessions.ts';
import { signUp } from '../../src/domain/users.ts';
import { startTestService, type TestService } from '../helpers/service.ts';

interface Person {
  token: string;
  csrf: string;
}

describe('API key revocation by role', () => {
  let svc: TestService;
  let organizationId: string;
  let owner: Person;
  let member: Person;
  let otherMember: Person;

  before(async () => {
    svc = await startTestService();
    const made = await signUp(svc.service.deps, {
      email: 'owner@example.com',
      password: 'correct horse battery',
      organizationName: 'Roles',
    });
    organizationId = made.organizationId;
    owner = { token: made.session.token, csrf: made.session.csrfToken };
    // Room for two members (the free plan has one user).
    const upgraded = await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${organizationId}`,
      admin: true,
      body: { plan: 'paid' },
    });
    assert.equal(upgraded.status, 200, upgraded.raw);
    const join = async (email: string): Promise<Person> => {
      const res = await svc.call({
        method: 'POST',
        url: `/api/admin/organizations/${organizationId}/users`,
        admin: true,
        body: { email, password: 'correct horse battery', role: 'member' },
      });
      assert.equal(res.status, 201, res.raw);
      const session = await signIn(svc.service.deps, { email, password: 'correct horse battery' });
      assert.ok(session);
      return { token: session.token, csrf: session.csrfToken };
    };
    member = await join('member@example.com');
    otherMember = await join('other@example.com');
  });
  after(() => svc.close());

  const post = (who: Person, url: string, form: Record<string, string> = {}) =>
    svc.app.inject({
      method: 'POST',
      url,
      headers: { cookie: `svc_session=${who.token}`, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf: who.csrf, ...form }).toString(),
    });

  /** A key made in the dashboard by this person: its id and value. */
  async function dashboardKey(who: Person, name: string) {
    const res = await post(who, '/dashboard/keys', { name });
    assert.equal(res.statusCode, 201, res.body);
    const value = /id="key-value">([^<]+)</.exec(res.body)?.[1];
    assert.ok(value);
    return { id: await keyId(name), value };
  }

  async function keyId(name: string): Promise<string> {
    const res = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${organizationId}/keys`,
      admin: true,
    });
    const key = (res.body.data ?? res.body).find((k: { name: string }) => k.name === name);
    assert.ok(key, name);
    return key.id;
  }

  async function operatorKey(name: string) {
    const res = await svc.call({
      method: 'POST',
      url: `/api/admin/organizations/${organizationId}/keys`,
      admin: true,
      body: { name },
    });
    assert.equal(res.status, 201, res.raw);
    return { id: res.body.id as string, value: res.body.apiKey as string };
  }

  const works = async (value: string) =>
    (
      await svc.call({
        method: 'GET',
        url: `/api/svc/billing/status?organizationId=${organizationId}`,
        key: value,
      })
    ).status === 200;

  test("a member cannot revoke the owner's keys, another member's keys or the operator's, and they keep working", async () => {
    const ownerKey = await dashboardKey(owner, "Owner's CI");
    const otherKey = await dashboardKey(otherMember, "Other member's laptop");
    const opKey = await operatorKey('Issued by the operator');
    for (const key of [ownerKey, otherKey, opKey]) {
      const res = await post(member, `/dashboard/keys/${key.id}/revoke`);
      assert.equal(res.statusCode, 403, res.body.slice(0, 300));
      assert.match(res.body, /only the keys they created/);
      assert.ok(await works(key.value), 'the key still opens the API');
    }
    // Nor offered: the member's page has no revoke form for them.
    const page = await svc.app.inject({
      method: 'GET',
      url: '/dashboard/keys',
      headers: { cookie: `svc_session=${member.token}` },
    });
    for (const key of [ownerKey, otherKey, opKey]) {
      assert.ok(!page.body.includes(`/dashboard/keys/${key.id}/revoke`), 'no revoke form for another key');
    }
  });

  test('a member revokes their own key', async () => {
    const own = await dashboardKey(member, "Member's script");
    const res = await post(member, `/dashboard/keys/${own.id}/revoke`);
    assert.equal(res.statusCode, 200, res.body.slice(0, 300));
    assert.equal(await works(own.value), false);
  });

  test("the owner revokes any key of the organization: a member's and the operator's", async () => {
    const memberKey = await dashboardKey(member, 'Member key the owner revokes');
    const opKey = await operatorKey('Operator key the owner revokes');
    for (const key of [memberKey, opKey]) {
      const res = await post(owner, `/dashboard/keys/${key.id}/revoke`);
      assert.equal(res.statusCode, 200, res.body.slice(0, 300));
      assert.equal(await works(key.value), false);
    }
  });

  test("the operator revokes any key, the owner's included", async () => {
    const ownerKey = await dashboardKey(owner, 'Owner key the operator revokes');
    const res = await svc.call({ method: 'DELETE', url: `/api/admin/keys/${ownerKey.id}`, admin: true });
    assert.ok(res.status === 200 || res.status === 204, res.raw);
    assert.equal(await works(ownerKey.value), false);
  });
});
