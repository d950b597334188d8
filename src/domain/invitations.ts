import type { Queryable } from '../db/db.ts';
import type { OrganizationRow } from '../db/sql/organizations.ts';
import {
  claimInvitation,
  countOrganizationUsers,
  countPendingInvitations,
  deletePendingInvitations,
  emailTaken,
  findPendingInvitation,
  insertInvitation,
  listPendingInvitations,
  lockOrganization,
  recordSignIn,
} from '../db/sql/users.ts';
import { errors } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import { hashPassword } from '../lib/password.ts';
import type { Deps } from './deps.ts';
import { effectiveLimits } from './plans.ts';
import {
  credentialProblems,
  emailTakenError,
  hashToken,
  insertUserOrConflict,
  type NewSession,
  newToken,
  normalizeEmail,
  normalizeName,
  startSession,
  throwIfProblems,
  type Viewer,
} from './sessions.ts';

/** An invitation can be accepted for 7 days. */
export const INVITATION_TTL_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * Throws plan_limit_exceeded when `seats` more users would take the organization beyond its
 * usersLimit. `taken` is what already counts: members, plus pending invitations when inviting.
 */
export function checkUsersLimit(org: OrganizationRow, taken: number, seats = 1): void {
  const { usersLimit } = effectiveLimits(org.plan, org.limit_overrides);
  if (taken + seats > usersLimit) {
    throw errors.planLimit(
      `The ${org.plan} plan allows ${usersLimit} user${usersLimit === 1 ? '' : 's'}; upgrade the plan for more`,
    );
  }
}

/**
 * The owner invites someone by e-mail: a random token (to put in a link), valid 7 days, of
 * which only a hash is stored. Members and pending invitations together may not exceed the
 * plan's usersLimit. Inviting an e-mail again replaces its pending invitation.
 */
export async function inviteMember(
  deps: Pick<Deps, 'db' | 'clock'>,
  viewer: Viewer,
  email: string,
): Promise<{ token: string; expiresAt: Date }> {
  if (viewer.role !== 'owner') throw errors.forbidden("Only the organization's owner can invite members");
  const normalized = normalizeEmail(email);
  throwIfProblems(credentialProblems({ email: normalized }));
  const now = deps.clock.now();
  const token = newToken();
  const expiresAt = new Date(now.getTime() + INVITATION_TTL_MS);
  await deps.db.transaction(async (tx) => {
    const org = await lockOrganization(tx, viewer.organizationId);
    if (!org) throw errors.notFound('Organization');
    if (await emailTaken(tx, normalized)) throw emailTakenError();
    await deletePendingInvitations(tx, org.id, normalized);
    const taken =
      (await countOrganizationUsers(tx, org.id)) + (await countPendingInvitations(tx, org.id, now));
    checkUsersLimit(org, taken);
    await insertInvitation(tx, {
      tokenHash: hashToken(token),
      organizationId: org.id,
      email: normalized,
      invitedBy: viewer.userId,
      now,
      expiresAt,
    });
  });
  return { token, expiresAt };
}

/** What an invitation link shows before it is accepted; undefined when unknown, used or expired. */
export async function invitationOf(
  deps: Pick<Deps, 'db' | 'clock'>,
  token: string,
): Promise<{ email: string; organizationName: string } | undefined> {
  if (!token || token.length > 256) return undefined;
  const row = await findPendingInvitation(deps.db, hashToken(token), deps.clock.now());
  return row && { email: row.email, organizationName: row.organization_name };
}

/**
 * Accepts an invitation: creates the member with the invited e-mail and opens their session.
 * 404 for an unknown, used or expired token; the usersLimit is checked again (on members).
 */
export async function acceptInvitation(
  deps: Pick<Deps, 'db' | 'clock'>,
  token: string,
  input: { password: string; name?: string },
): Promise<NewSession> {
  const now = deps.clock.now();
  const tokenHash = hashToken(token);
  const pending = async (db: Queryable) =>
    token && token.length <= 256 ? findPendingInvitation(db, tokenHash, now) : undefined;
  if (!(await pending(deps.db))) throw errors.notFound('Invitation');
  const name = normalizeName(input.name);
  throwIfProblems(credentialProblems({ password: input.password, name }));
  const passwordHash = await hashPassword(input.password);
  return deps.db.transaction(async (tx) => {
    // The organization is locked before the invitation, in the order inviteMember locks them.
    const seen = await pending(tx);
    const org = seen && (await lockOrganization(tx, seen.organization_id));
    const invitation = org && (await claimInvitation(tx, tokenHash, now));
    if (!org || !invitation) throw errors.notFound('Invitation');
    checkUsersLimit(org, await countOrganizationUsers(tx, org.id));
    if (await emailTaken(tx, invitation.email)) throw emailTakenError();
    const user = await insertUserOrConflict(tx, {
      id: newId(),
      organizationId: org.id,
      email: invitation.email,
      name,
      passwordHash,
      role: 'member',
      now,
    });
    await recordSignIn(tx, user.id, now);
    return startSession(tx, user.id, now);
  });
}

/** The organization's pending invitations (not accepted, not expired), oldest first. */
export async function listInvitations(
  deps: Pick<Deps, 'db' | 'clock'>,
  organizationId: string,
): Promise<Array<{ email: string; createdAt: string; expiresAt: string }>> {
  const rows = await listPendingInvitations(deps.db, organizationId, deps.clock.now());
  return rows.map((r) => ({
    email: r.email,
    createdAt: r.created_at.toISOString(),
    expiresAt: r.expires_at.toISOString(),
  }));
}
