import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { MAX_SESSIONS_PER_USER } from '../src/db/sql/users.ts';
import { createApiKey, listOrganizationKeys } from '../src/domain/api-keys.ts';
import type { Deps } from '../src/domain/deps.ts';
import { startSession } from '../src/domain/sessions.ts';
import {
  acceptInvitation,
  countUsers,
  createUser,
  invitationOf,
  inviteMember,
  listInvitations,
  listMembers,
  SESSION_TTL_MS,
  signIn,
  signOut,
  signUp,
  type Viewer,
  viewerOfSession,
} from '../src/domain/users.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { dummyVerifyPassword, hashPassword, verifyPassword } from '../src/lib/password.ts';
import { startTestService, type TestService } from './helpers/service.ts';

const DAY_MS = 86_400_000;
const PASSWORD = 'correct horse battery';

const uniqueEmail = (who = 'user') => `${who}-${randomBytes(4).toString('hex')}@example.com`;

describe('users, sessions and invitations', () => {
  const clock = new ManualClock('2030-03-01T09:00:00Z');
  let svc: TestService;
  let deps: Deps;

  before(async () => {
    svc = await startTestService({ clock });
    deps = svc.service.deps;
  });
  after(() => svc.close());

  /** A new organization made by sign-up, with its owner signed in. */
  async function ownerOfNewOrg(): Promise<{ viewer: Viewer; token: string; organizationId: string }> {
    const email = uniqueEmail('owner');
    const { session, organizationId } = await signUp(deps, {
      email,
      password: PASSWORD,
      organizationName: 'Owner Co',
    });
    const viewer = await viewerOfSession(deps, session.token);
    assert.ok(viewer);
    return { viewer, token: session.token, organizationId };
  }

  const setUsersLimit = async (organizationId: string, usersLimit: number) => {
    const res = await svc.call({
      method: 'PATCH',
      url: `/api/admin/organizations/${organizationId}`,
      admin: true,
      body: { usersLimit },
    });
    assert.equal(res.status, 200, res.raw);
  };

  test('sign-up creates an organization on the free plan, its owner and a signed-in session', async () => {
    const email = uniqueEmail('Founder');
    const { session, organizationId, userId } = await signUp(deps, {
      email: `  ${email.toUpperCase()} `,
      password: PASSWORD,
      name: ' Ada ',
      organizationName: ' Analytical Engines ',
    });
    assert.ok(session.token.length >= 43);
    assert.ok(session.csrfToken.length >= 43);
    assert.equal(session.expiresAt.getTime(), clock.now().getTime() + SESSION_TTL_MS);

    const org = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${organizationId}`,
      admin: true,
    });
    assert.equal(org.body.name, 'Analytical Engines');
    assert.equal(org.body.plan, 'free');

    const viewer = await viewerOfSession(deps, session.token);
    assert.deepEqual(viewer, {
      userId,
      organizationId,
      email: email.toLowerCase(),
      name: 'Ada',
      role: 'owner',
      csrfToken: session.csrfToken,
    });
    const members = await listMembers(deps, organizationId);
    assert.equal(members.length, 1);
    assert.equal(members[0]?.role, 'owner');
    assert.equal(members[0]?.lastSignInAt, clock.now().toISOString());
    assert.equal(await countUsers(deps.db, organizationId), 1);
  });

  test('a person keeps at most 100 sessions: one more ends the least recently used', async () => {
    const { session, userId } = await signUp(deps, {
      email: uniqueEmail('many-devices'),
      password: PASSWORD,
      organizationName: 'Many Devices',
    });
    const tokens: string[] = [];
    for (let i = 1; i < MAX_SESSIONS_PER_USER; i++) {
      clock.advance(1000);
      tokens.push((await startSession(deps.db, userId, clock.now())).token);
    }
    const count = async () =>
      (
        await deps.db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM user_sessions WHERE user_id = $1',
          [userId],
        )
      )[0]?.n;
    assert.equal(await count(), MAX_SESSIONS_PER_USER, 'the sign-up session and 99 more: none ended yet');
    // The sign-up session is used again (over a minute later): now the most recently used.
    clock.advance(2 * 60_000);
    assert.ok(await viewerOfSession(deps, session.token));
    clock.advance(1000);
    const newest = (await startSession(deps.db, userId, clock.now())).token;
    assert.equal(await count(), MAX_SESSIONS_PER_USER);
    assert.equal(await viewerOfSession(deps, tokens[0] ?? ''), undefined, 'the least recently used is ended');
    assert.ok(await viewerOfSession(deps, tokens[1] ?? ''), 'the next one is not');
    assert.ok(await viewerOfSession(deps, session.token), 'the one used again is kept');
    assert.ok(await viewerOfSession(deps, newest));
  });

  test('sign-up makes no API key: people create their own, each recorded with its creator', async () => {
    const { viewer, organizationId } = await ownerOfNewOrg();
    assert.deepEqual(await listOrganizationKeys(deps, organizationId), []);
    await createApiKey(deps, deps.db, { organizationId, name: 'Mine', createdByUserId: viewer.userId });
    const keys = await listOrganizationKeys(deps, organizationId);
    assert.deepEqual(keys[0]?.createdBy, { id: viewer.userId, email: viewer.email });
  });

  test('an e-mail that already has an account cannot sign up again, whatever its case (409)', async () => {
    const email = uniqueEmail();
    await signUp(deps, { email, password: PASSWORD, organizationName: 'First' });
    await assert.rejects(
      signUp(deps, { email: email.toUpperCase(), password: PASSWORD, organizationName: 'Second' }),
      { code: 'conflict', status: 409 },
    );
  });

  test('a bad e-mail, a password of the wrong length or an empty organization name is a 400', async () => {
    const cases: [Parameters<typeof signUp>[1], string][] = [
      [{ email: uniqueEmail(), password: 'short', organizationName: 'X' }, '/body/password'],
      [{ email: uniqueEmail(), password: 'x'.repeat(201), organizationName: 'X' }, '/body/password'],
      [{ email: 'not-an-email', password: PASSWORD, organizationName: 'X' }, '/body/email'],
      [{ email: 'a@b', password: PASSWORD, organizationName: 'X' }, '/body/email'],
      [
        { email: `${'a'.repeat(60)}@${'b'.repeat(300)}.com`, password: PASSWORD, organizationName: 'X' },
        '/body/email',
      ],
      [{ email: uniqueEmail(), password: PASSWORD, organizationName: '   ' }, '/body/organizationName'],
      [
        { email: uniqueEmail(), password: PASSWORD, organizationName: 'x'.repeat(256) },
        '/body/organizationName',
      ],
    ];
    for (const [input, path] of cases) {
      await assert.rejects(signUp(deps, input), (err: { code: string; details: { path: string }[] }) => {
        assert.equal(err.code, 'validation_error');
        assert.deepEqual(
          err.details.map((d) => d.path),
          [path],
        );
        return true;
      });
    }
    await signUp(deps, { email: uniqueEmail(), password: 'x'.repeat(10), organizationName: 'Ten' });
  });

  test('sign-in with the right password opens a session; a wrong password or an unknown e-mail gives nothing', async () => {
    const email = uniqueEmail();
    const { userId } = await signUp(deps, { email, password: PASSWORD, organizationName: 'Sign-in Co' });
    clock.advance(60_000);
    const session = await signIn(deps, { email: ` ${email.toUpperCase()}`, password: PASSWORD });
    assert.ok(session);
    assert.equal((await viewerOfSession(deps, session.token))?.userId, userId);
    const [row] = await deps.db.query<{ last_sign_in_at: Date }>(
      'SELECT last_sign_in_at FROM users WHERE id = $1',
      [userId],
    );
    assert.equal(row?.last_sign_in_at.toISOString(), clock.now().toISOString());

    assert.equal(await signIn(deps, { email, password: `${PASSWORD}!` }), undefined);
    assert.equal(await signIn(deps, { email: uniqueEmail('nobody'), password: PASSWORD }), undefined);
    assert.equal(await signIn(deps, { email, password: 'x'.repeat(5000) }), undefined);
    assert.equal(await signIn(deps, { email: '', password: '' }), undefined);
  });

  test('a session slides on while used, ends after 14 idle days, and sign-out ends it at once', async () => {
    const { token } = await ownerOfNewOrg();
    assert.equal(await viewerOfSession(deps, undefined), undefined);
    assert.equal(await viewerOfSession(deps, 'no-such-token'), undefined);

    clock.advance(13 * DAY_MS);
    assert.ok(await viewerOfSession(deps, token), 'still valid after 13 days');
    clock.advance(13 * DAY_MS);
    assert.ok(await viewerOfSession(deps, token), 'used 13 days ago, so moved on');
    clock.advance(SESSION_TTL_MS);
    assert.equal(await viewerOfSession(deps, token), undefined, 'expired after 14 idle days');

    const second = await ownerOfNewOrg();
    await signOut(deps, second.token);
    assert.equal(await viewerOfSession(deps, second.token), undefined);
    await signOut(deps, second.token);
  });

  test('sessions and invitations are stored only as hashes', async () => {
    const { token, viewer } = await ownerOfNewOrg();
    await setUsersLimit(viewer.organizationId, 2);
    const invitation = await inviteMember(deps, viewer, uniqueEmail('hashed'));
    const dump = JSON.stringify([
      await deps.db.query('SELECT * FROM user_sessions'),
      await deps.db.query('SELECT * FROM invitations'),
    ]);
    assert.ok(!dump.includes(token));
    assert.ok(!dump.includes(invitation.token));
  });

  test('the password is stored as an scrypt hash, never in clear', async () => {
    const email = uniqueEmail();
    const { userId } = await signUp(deps, { email, password: PASSWORD, organizationName: 'Hash Co' });
    const [row] = await deps.db.query<{ password_hash: string }>(
      'SELECT password_hash FROM users WHERE id = $1',
      [userId],
    );
    assert.match(row?.password_hash ?? '', /^scrypt\$32768\$8\$1\$[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/]{86}==$/);
    assert.ok(!row?.password_hash.includes(PASSWORD));
    const members = JSON.stringify(await listMembers(deps, (await viewerOf(email)).organizationId));
    assert.ok(!members.includes('scrypt'));
  });

  async function viewerOf(email: string): Promise<Viewer> {
    const session = await signIn(deps, { email, password: PASSWORD });
    assert.ok(session);
    const viewer = await viewerOfSession(deps, session.token);
    assert.ok(viewer);
    return viewer;
  }

  test('only the owner can invite members', async () => {
    const { viewer } = await ownerOfNewOrg();
    await setUsersLimit(viewer.organizationId, 3);
    const invited = uniqueEmail('member');
    const { token } = await inviteMember(deps, viewer, invited);
    await acceptInvitation(deps, token, { password: PASSWORD });
    const member = await viewerOf(invited);
    assert.equal(member.role, 'member');
    await assert.rejects(inviteMember(deps, member, uniqueEmail()), { code: 'forbidden', status: 403 });
  });

  test('invitations stay within usersLimit: beyond it is 403 plan_limit_exceeded, until the limit is raised', async () => {
    const { viewer, organizationId } = await ownerOfNewOrg();
    await assert.rejects(inviteMember(deps, viewer, uniqueEmail()), {
      code: 'plan_limit_exceeded',
      status: 403,
    });

    await setUsersLimit(organizationId, 3);
    const first = uniqueEmail('first');
    const second = uniqueEmail('second');
    await inviteMember(deps, viewer, first);
    await inviteMember(deps, viewer, second);
    assert.deepEqual(
      (await listInvitations(deps, organizationId)).map((i) => i.email),
      [first, second],
    );
    // The owner and two pending invitations fill the three places.
    await assert.rejects(inviteMember(deps, viewer, uniqueEmail()), { code: 'plan_limit_exceeded' });
    // Inviting the same e-mail again replaces its invitation rather than taking another place.
    const again = await inviteMember(deps, viewer, second.toUpperCase());
    assert.equal((await listInvitations(deps, organizationId)).length, 2);
    assert.equal((await invitationOf(deps, again.token))?.email, second);
  });

  test('concurrent invitations cannot exceed usersLimit', async () => {
    const { viewer, organizationId } = await ownerOfNewOrg();
    await setUsersLimit(organizationId, 2);
    const results = await Promise.allSettled([
      inviteMember(deps, viewer, uniqueEmail()),
      inviteMember(deps, viewer, uniqueEmail()),
      inviteMember(deps, viewer, uniqueEmail()),
    ]);
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
    assert.equal((await listInvitations(deps, organizationId)).length, 1);
  });

  test('an e-mail that already has an account cannot be invited (409), nor an invalid one (400)', async () => {
    const { viewer, organizationId } = await ownerOfNewOrg();
    await setUsersLimit(organizationId, 5);
    const elsewhere = await ownerOfNewOrg();
    await assert.rejects(inviteMember(deps, viewer, elsewhere.viewer.email), { code: 'conflict' });
    await assert.rejects(inviteMember(deps, viewer, viewer.email), { code: 'conflict' });
    await assert.rejects(inviteMember(deps, viewer, 'nope'), { code: 'validation_error' });
  });

  test('accepting an invitation creates a member with the invited e-mail who can sign in; the token then is 404', async () => {
    const { viewer, organizationId } = await ownerOfNewOrg();
    await setUsersLimit(organizationId, 3);
    const email = uniqueEmail('Invitee');
    const { token, expiresAt } = await inviteMember(deps, viewer, email);
    assert.equal(expiresAt.getTime(), clock.now().getTime() + 7 * DAY_MS);
    assert.deepEqual(await invitationOf(deps, token), {
      email: email.toLowerCase(),
      organizationName: 'Owner Co',
    });

    await assert.rejects(acceptInvitation(deps, token, { password: 'short' }), { code: 'validation_error' });
    clock.advance(60_000); // members are listed oldest first
    const session = await acceptInvitation(deps, token, { password: PASSWORD, name: 'Grace' });
    const member = await viewerOfSession(deps, session.token);
    assert.equal(member?.email, email.toLowerCase());
    assert.equal(member?.organizationId, organizationId);
    assert.equal(member?.role, 'member');
    assert.equal(member?.name, 'Grace');
    assert.ok(await signIn(deps, { email, password: PASSWORD }));

    assert.deepEqual(
      (await listMembers(deps, organizationId)).map((m) => m.role),
      ['owner', 'member'],
    );
    assert.deepEqual(await listInvitations(deps, organizationId), []);
    assert.equal(await invitationOf(deps, token), undefined);
    await assert.rejects(acceptInvitation(deps, token, { password: PASSWORD }), {
      code: 'not_found',
      status: 404,
    });
    await assert.rejects(acceptInvitation(deps, 'made-up', { password: PASSWORD }), { code: 'not_found' });
  });

  test('an expired invitation is 404', async () => {
    const { viewer, organizationId } = await ownerOfNewOrg();
    await setUsersLimit(organizationId, 2);
    const { token } = await inviteMember(deps, viewer, uniqueEmail());
    clock.advance(7 * DAY_MS + 1000);
    assert.equal(await invitationOf(deps, token), undefined);
    assert.deepEqual(await listInvitations(deps, organizationId), []);
    await assert.rejects(acceptInvitation(deps, token, { password: PASSWORD }), { code: 'not_found' });
  });

  test('accepting checks usersLimit again', async () => {
    const { viewer, organizationId } = await ownerOfNewOrg();
    await setUsersLimit(organizationId, 2);
    const { token } = await inviteMember(deps, viewer, uniqueEmail());
    await setUsersLimit(organizationId, 1);
    await assert.rejects(acceptInvitation(deps, token, { password: PASSWORD }), {
      code: 'plan_limit_exceeded',
    });
    assert.ok(await invitationOf(deps, token), 'the refused invitation stays pending');
  });

  test('usersCount in the billing status is the number of users', async () => {
    const org = await svc.createOrg();
    const status = () =>
      svc.call({
        method: 'GET',
        url: `/api/svc/billing/status?organizationId=${org.organizationId}`,
        key: org.apiKey,
      });
    assert.equal((await status()).body.usersCount, 0);
    await createUser(deps, org.organizationId, { email: uniqueEmail(), password: PASSWORD });
    const res = await status();
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.usersCount, 1);
    assert.equal(res.body.usersLimit, 1);
  });

  test('an API key created by a user records them, and the admin list shows who', async () => {
    const { viewer, organizationId } = await ownerOfNewOrg();
    const { key, apiKey } = await createApiKey(deps, deps.db, {
      organizationId,
      name: 'made by the owner',
      createdByUserId: viewer.userId,
    });
    assert.deepEqual(key.createdBy, { id: viewer.userId, email: viewer.email });
    const billing = await svc.call({
      method: 'GET',
      url: `/api/svc/billing/status?organizationId=${organizationId}`,
      key: apiKey,
    });
    assert.equal(billing.status, 200, billing.raw);
    assert.equal(billing.body.usersCount, 1);

    const listed = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${organizationId}/keys`,
      admin: true,
    });
    const mine = listed.body.find((k: { id: string }) => k.id === key.id);
    assert.deepEqual(mine.createdBy, { id: viewer.userId, email: viewer.email });

    const admin = await svc.createOrg();
    const adminKeys = await svc.call({
      method: 'GET',
      url: `/api/admin/organizations/${admin.organizationId}/keys`,
      admin: true,
    });
    assert.equal('createdBy' in adminKeys.body[0], false, 'a key made by the operator has no creator');

    await deps.db.query('DELETE FROM users WHERE id = $1', [viewer.userId]);
    const afterDelete = await listOrganizationKeys(deps, organizationId);
    assert.ok(afterDelete.every((k) => k.createdBy === undefined));
  });
});

describe('sign-up switched off', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService({ env: { SVC_SIGNUP: 'false' } });
  });
  after(() => svc.close());

  test('SVC_SIGNUP=false refuses sign-up with 403, while an operator can still create users', async () => {
    const deps = svc.service.deps;
    await assert.rejects(
      signUp(deps, { email: uniqueEmail(), password: PASSWORD, organizationName: 'Nope' }),
      (err: { code: string; status: number; message: string }) => {
        assert.equal(err.code, 'forbidden');
        assert.equal(err.status, 403);
        assert.equal(err.message, 'Sign-up is turned off on this service');
        return true;
      },
    );
    const org = await svc.createOrg();
    const email = uniqueEmail();
    await createUser(deps, org.organizationId, { email, password: PASSWORD });
    assert.ok(await signIn(deps, { email, password: PASSWORD }));
  });
});

describe('password hashing', () => {
  test('a hash verifies its password and no other, and every hash is salted differently', async () => {
    const one = await hashPassword('pässwörd-123');
    const two = await hashPassword('pässwörd-123');
    assert.notEqual(one, two);
    assert.equal(await verifyPassword('pässwörd-123', one), true);
    assert.equal(await verifyPassword('pässwörd-123', two), true);
    assert.equal(await verifyPassword('pässwörd-124', one), false);
    // The same text in another Unicode normal form is the same password.
    assert.equal(await verifyPassword('pa\u0308sswo\u0308rd-123', one), true);
  });

  test('a malformed or absurd stored value never verifies', async () => {
    for (const encoded of [
      '',
      'plain',
      'bcrypt$10$abc',
      'scrypt$1000$8$1$c2FsdHNhbHQ=$aGFzaGhhc2hoYXNoaGFzaA==',
      'scrypt$1073741824$8$1$c2FsdHNhbHQ=$aGFzaGhhc2hoYXNoaGFzaA==',
      'scrypt$32768$8$1$$',
    ]) {
      assert.equal(await verifyPassword('whatever-it-is', encoded), false, encoded);
    }
    assert.equal(await dummyVerifyPassword('whatever-it-is'), false);
  });
});
