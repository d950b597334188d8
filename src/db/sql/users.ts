import type { Queryable } from '../db.ts';
import type { OrganizationRow } from './organizations.ts';

export type UserRole = 'owner' | 'member';

export interface UserRow {
  id: string;
  organization_id: string;
  email: string;
  name: string | null;
  password_hash: string;
  role: UserRole;
  created_at: Date;
  last_sign_in_at: Date | null;
}

/** A user without the password hash: what lists and views are made of. */
export type UserListRow = Omit<UserRow, 'password_hash'>;

const LIST_COLUMNS = 'id, organization_id, email, name, role, created_at, last_sign_in_at';

// ---- users ----

export async function insertUser(
  db: Queryable,
  u: {
    id: string;
    organizationId: string;
    email: string;
    name: string | null;
    passwordHash: string;
    role: UserRole;
    now: Date;
  },
): Promise<UserListRow> {
  const [row] = await db.query<UserListRow>(
    `INSERT INTO users (id, organization_id, email, name, password_hash, role, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${LIST_COLUMNS}`,
    [u.id, u.organizationId, u.email, u.name, u.passwordHash, u.role, u.now],
  );
  if (!row) throw new Error('insert returned no row');
  return row;
}

/** The user with this (normalised) e-mail, with the password hash, for signing in. */
export async function findUserByEmail(db: Queryable, email: string): Promise<UserRow | undefined> {
  const [row] = await db.query<UserRow>('SELECT * FROM users WHERE email = $1', [email]);
  return row;
}

export async function emailTaken(db: Queryable, email: string): Promise<boolean> {
  const rows = await db.query('SELECT 1 FROM users WHERE email = $1', [email]);
  return rows.length > 0;
}

export async function countOrganizationUsers(db: Queryable, organizationId: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM users WHERE organization_id = $1',
    [organizationId],
  );
  return row?.n ?? 0;
}

export function listOrganizationUsers(db: Queryable, organizationId: string): Promise<UserListRow[]> {
  return db.query<UserListRow>(
    `SELECT ${LIST_COLUMNS} FROM users WHERE organization_id = $1 ORDER BY created_at, id`,
    [organizationId],
  );
}

export async function recordSignIn(db: Queryable, userId: string, now: Date): Promise<void> {
  await db.query('UPDATE users SET last_sign_in_at = $2 WHERE id = $1', [userId, now]);
}

/**
 * Locks the organization's row for the rest of the transaction (user and invitation counts
 * against usersLimit are checked under it, so concurrent requests cannot exceed it).
 */
export async function lockOrganization(
  db: Queryable,
  organizationId: string,
): Promise<OrganizationRow | undefined> {
  const [row] = await db.query<OrganizationRow>('SELECT * FROM organizations WHERE id = $1 FOR UPDATE', [
    organizationId,
  ]);
  return row;
}

// ---- sessions ----

/**
 * Sessions one person keeps: starting one more ends the least recently used beyond this.
 * Sign-ins are limited per client address and minute, not per person, and a session lasts 14
 * days: without a bound, signing in again and again would grow one person's sessions without
 * end.
 */
export const MAX_SESSIONS_PER_USER = 100;

/** Starts a session and ends the user's least recently used ones beyond MAX_SESSIONS_PER_USER. */
export async function insertSession(
  db: Queryable,
  s: { idHash: string; userId: string; csrfToken: string; now: Date; expiresAt: Date },
): Promise<void> {
  await db.query(
    `WITH made AS (
       INSERT INTO user_sessions (id_hash, user_id, csrf_token, created_at, expires_at, last_seen_at)
       VALUES ($1, $2, $3, $4, $5, $4) RETURNING 1
     ), ended AS (
       -- The statement's snapshot is from before the INSERT: the new session is not among these.
       DELETE FROM user_sessions WHERE id_hash IN (
         SELECT x.id_hash FROM user_sessions x WHERE x.user_id = $2
          ORDER BY x.last_seen_at DESC, x.created_at DESC, x.id_hash OFFSET $6)
     )
     SELECT count(*)::int AS n FROM made`,
    [s.idHash, s.userId, s.csrfToken, s.now, s.expiresAt, MAX_SESSIONS_PER_USER - 1],
  );
}

export interface SessionViewerRow {
  user_id: string;
  organization_id: string;
  email: string;
  name: string | null;
  role: UserRole;
  csrf_token: string;
}

/**
 * The user of an unexpired session, in one statement that also slides the session on: when
 * it was last seen over a minute ago, `last_seen_at` becomes now and `expires_at` becomes
 * `slideTo`.
 */
export async function findSessionViewer(
  db: Queryable,
  s: { idHash: string; now: Date; slideTo: Date },
): Promise<SessionViewerRow | undefined> {
  const [row] = await db.query<SessionViewerRow>(
    `WITH session AS (
       SELECT id_hash, user_id, csrf_token FROM user_sessions WHERE id_hash = $1 AND expires_at > $2
     ), touched AS (
       UPDATE user_sessions SET last_seen_at = $2, expires_at = $3
       WHERE id_hash = (SELECT id_hash FROM session) AND last_seen_at < $2 - interval '1 minute'
       RETURNING id_hash
     )
     SELECT u.id AS user_id, u.organization_id, u.email, u.name, u.role, session.csrf_token,
            (SELECT count(*) FROM touched) AS touched
     FROM session JOIN users u ON u.id = session.user_id`,
    [s.idHash, s.now, s.slideTo],
  );
  return row;
}

export async function deleteSession(db: Queryable, idHash: string): Promise<void> {
  await db.query('DELETE FROM user_sessions WHERE id_hash = $1', [idHash]);
}

export async function deleteExpiredUserSessions(db: Queryable, userId: string, now: Date): Promise<void> {
  await db.query('DELETE FROM user_sessions WHERE user_id = $1 AND expires_at <= $2', [userId, now]);
}

/** Removes every expired session and every invitation that expired unaccepted; for a maintenance loop. */
export async function pruneExpiredSessionsAndInvitations(db: Queryable, now: Date): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `WITH s AS (DELETE FROM user_sessions WHERE expires_at <= $1 RETURNING 1),
          i AS (DELETE FROM invitations WHERE accepted_at IS NULL AND expires_at <= $1 RETURNING 1)
     SELECT ((SELECT count(*) FROM s) + (SELECT count(*) FROM i))::int AS n`,
    [now],
  );
  return row?.n ?? 0;
}

// ---- invitations ----

export interface InvitationRow {
  token_hash: string;
  organization_id: string;
  email: string;
  role: 'member';
  invited_by: string | null;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
}

export async function insertInvitation(
  db: Queryable,
  i: {
    tokenHash: string;
    organizationId: string;
    email: string;
    invitedBy: string | null;
    now: Date;
    expiresAt: Date;
  },
): Promise<InvitationRow> {
  const [row] = await db.query<InvitationRow>(
    `INSERT INTO invitations (token_hash, organization_id, email, role, invited_by, created_at, expires_at)
     VALUES ($1, $2, $3, 'member', $4, $5, $6) RETURNING *`,
    [i.tokenHash, i.organizationId, i.email, i.invitedBy, i.now, i.expiresAt],
  );
  if (!row) throw new Error('insert returned no row');
  return row;
}

/** Withdraws the organization's pending invitations of one e-mail (a new one replaces them). */
export async function deletePendingInvitations(
  db: Queryable,
  organizationId: string,
  email: string,
): Promise<void> {
  await db.query(
    'DELETE FROM invitations WHERE organization_id = $1 AND email = $2 AND accepted_at IS NULL',
    [organizationId, email],
  );
}

export async function countPendingInvitations(
  db: Queryable,
  organizationId: string,
  now: Date,
): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM invitations
     WHERE organization_id = $1 AND accepted_at IS NULL AND expires_at > $2`,
    [organizationId, now],
  );
  return row?.n ?? 0;
}

export function listPendingInvitations(
  db: Queryable,
  organizationId: string,
  now: Date,
): Promise<InvitationRow[]> {
  return db.query<InvitationRow>(
    `SELECT * FROM invitations
     WHERE organization_id = $1 AND accepted_at IS NULL AND expires_at > $2
     ORDER BY created_at, email`,
    [organizationId, now],
  );
}

/** A pending, unexpired invitation with its organization's name. */
export async function findPendingInvitation(
  db: Queryable,
  tokenHash: string,
  now: Date,
): Promise<(InvitationRow & { organization_name: string }) | undefined> {
  const [row] = await db.query<InvitationRow & { organization_name: string }>(
    `SELECT i.*, o.name AS organization_name
     FROM invitations i JOIN organizations o ON o.id = i.organization_id
     WHERE i.token_hash = $1 AND i.accepted_at IS NULL AND i.expires_at > $2`,
    [tokenHash, now],
  );
  return row;
}

/**
 * Marks a pending, unexpired invitation accepted and returns it; undefined when there is no
 * such invitation. The row stays locked until the transaction ends, so it is accepted once.
 */
export async function claimInvitation(
  db: Queryable,
  tokenHash: string,
  now: Date,
): Promise<InvitationRow | undefined> {
  const [row] = await db.query<InvitationRow>(
    `UPDATE invitations SET accepted_at = $2
     WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > $2 RETURNING *`,
    [tokenHash, now],
  );
  return row;
}
