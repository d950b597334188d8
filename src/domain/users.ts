import type { Queryable } from '../db/db.ts';
import { findOrganization } from '../db/sql/organizations.ts';
import {
  countOrganizationUsers,
  emailTaken,
  listOrganizationUsers,
  lockOrganization,
  recordSignIn,
  type UserRole,
} from '../db/sql/users.ts';
import { errors } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import { hashPassword } from '../lib/password.ts';
import type { Deps } from './deps.ts';
import { checkUsersLimit } from './invitations.ts';
import { insertOrganizationWithKey } from './organizations.ts';
import {
  credentialProblems,
  emailTakenError,
  insertUserOrConflict,
  type NewSession,
  normalizeEmail,
  normalizeName,
  startSession,
  throwIfProblems,
} from './sessions.ts';

/**
 * People: users belong to one organization each (one account per e-mail across the service),
 * as its `owner` or a `member`. Sessions are in sessions.ts, invitations in invitations.ts;
 * everything the dashboard uses is exported from here.
 */
export {
  acceptInvitation,
  invitationOf,
  inviteMember,
  listInvitations,
} from './invitations.ts';
export {
  type NewSession,
  SESSION_TTL_MS,
  signIn,
  signOut,
  type Viewer,
  viewerOfSession,
} from './sessions.ts';

const ORGANIZATION_NAME_MAX_LENGTH = 255;

/**
 * Sign-up: a new organization on the free plan (with its webhook secret and a first API key,
 * recorded as created by the owner) and its owner, signed in. 403 when SVC_SIGNUP is off, 400
 * for bad fields, 409 when the e-mail has an account.
 */
export async function signUp(
  deps: Deps,
  input: { email: string; password: string; name?: string; organizationName: string },
): Promise<{ session: NewSession; organizationId: string; userId: string }> {
  if (!deps.config.signupEnabled) throw errors.forbidden('Sign-up is turned off on this service');
  const email = normalizeEmail(input.email);
  const name = normalizeName(input.name);
  const organizationName = input.organizationName.trim();
  const details = credentialProblems({ email, password: input.password, name });
  if (organizationName.length === 0 || [...organizationName].length > ORGANIZATION_NAME_MAX_LENGTH) {
    details.push({
      path: '/body/organizationName',
      message: `must be 1 to ${ORGANIZATION_NAME_MAX_LENGTH} characters`,
    });
  }
  throwIfProblems(details);
  if (await emailTaken(deps.db, email)) throw emailTakenError();
  const passwordHash = await hashPassword(input.password);
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    const created = await insertOrganizationWithKey(deps, tx, {
      name: organizationName,
      plan: 'free',
      withKey: false,
    });
    const organizationId = created.organization.id;
    const user = await insertUserOrConflict(tx, {
      id: newId(),
      organizationId,
      email,
      name,
      passwordHash,
      role: 'owner',
      now,
    });
    await recordSignIn(tx, user.id, now);
    const session = await startSession(tx, user.id, now);
    return { session, organizationId, userId: user.id };
  });
}

export interface Member {
  id: string;
  email: string;
  name: string | null;
  role: 'owner' | 'member';
  createdAt: string;
  lastSignInAt: string | null;
}

/** The organization's users, oldest first; never their password hashes. */
export async function listMembers(deps: Pick<Deps, 'db'>, organizationId: string): Promise<Member[]> {
  const rows = await listOrganizationUsers(deps.db, organizationId);
  return rows.map((r) => ({
    id: r.id,
    email: r.email,
    name: r.name,
    role: r.role,
    createdAt: r.created_at.toISOString(),
    lastSignInAt: r.last_sign_in_at?.toISOString() ?? null,
  }));
}

const ROLES: readonly UserRole[] = ['owner', 'member'];

/**
 * An operator creates a user for an existing organization (admin API, CLI). Without a role,
 * the organization's first user is its owner and later ones are members. 404 unknown
 * organization, 409 e-mail taken, 403 plan_limit_exceeded beyond usersLimit (members only:
 * pending invitations are checked again when accepted).
 */
export async function createUser(
  deps: Pick<Deps, 'db' | 'clock'>,
  organizationId: string,
  input: { email: string; password: string; name?: string; role?: 'owner' | 'member' },
): Promise<{ id: string; email: string; role: 'owner' | 'member'; createdAt: string }> {
  const email = normalizeEmail(input.email);
  const name = normalizeName(input.name);
  const details = credentialProblems({ email, password: input.password, name });
  if (input.role !== undefined && !ROLES.includes(input.role)) {
    details.push({ path: '/body/role', message: 'must be owner or member' });
  }
  throwIfProblems(details);
  // Checked before the (deliberately slow) hashing, and again under the lock.
  const check = async (db: Queryable, lock: boolean) => {
    const org = await (lock ? lockOrganization(db, organizationId) : findOrganization(db, organizationId));
    if (!org) throw errors.notFound('Organization');
    if (await emailTaken(db, email)) throw emailTakenError();
    const members = await countOrganizationUsers(db, organizationId);
    checkUsersLimit(org, members);
    return members;
  };
  await check(deps.db, false);
  const passwordHash = await hashPassword(input.password);
  const now = deps.clock.now();
  const user = await deps.db.transaction(async (tx) => {
    const members = await check(tx, true);
    return insertUserOrConflict(tx, {
      id: newId(),
      organizationId,
      email,
      name,
      passwordHash,
      role: input.role ?? (members === 0 ? 'owner' : 'member'),
      now,
    });
  });
  return { id: user.id, email: user.email, role: user.role, createdAt: user.created_at.toISOString() };
}

/** The number of users of the organization (billing status `usersCount`). */
export async function countUsers(db: Queryable, organizationId: string): Promise<number> {
  return countOrganizationUsers(db, organizationId);
}
