import { createHash, randomBytes } from 'node:crypto';
import type { Queryable } from '../db/db.ts';
import { countHit } from '../db/sql/rate-limits.ts';
import {
  deleteExpiredUserSessions,
  deleteSession,
  findSessionViewer,
  findUserByEmail,
  insertSession,
  insertUser,
  recordSignIn,
  type UserListRow,
  type UserRole,
} from '../db/sql/users.ts';
import { type ErrorDetail, errors } from '../lib/errors.ts';
import { dummyVerifyPassword, verifyPassword } from '../lib/password.ts';
import { isUniqueViolation } from '../lib/slug.ts';
import {
  EMAIL_MAX_LENGTH,
  NAME_MAX_LENGTH,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
} from '../schemas/bounds.ts';
import type { Deps } from './deps.ts';
import { windowStart } from './rate-limit.ts';

/** The signed-in user of a request, as the dashboard sees it. */
export interface Viewer {
  userId: string;
  organizationId: string;
  email: string;
  name: string | null;
  role: 'owner' | 'member';
  /** The session's anti-CSRF token: forms must send it back. */
  csrfToken: string;
}

/** A session just opened: `token` goes into the cookie and is stored nowhere (only its hash is). */
export interface NewSession {
  token: string;
  csrfToken: string;
  expiresAt: Date;
}

/** Sessions last 14 days from their last use (sliding; moved on at most once a minute). */
export const SESSION_TTL_MS = 14 * 24 * 60 * 60 * 1000;

// ---- tokens ----

/** A random token: 32 bytes, base64url. */
export const newToken = (): string => randomBytes(32).toString('base64url');

/** What is stored of a session or invitation token: its SHA-256, hex. */
export const hashToken = (token: string): string => createHash('sha256').update(token).digest('hex');

// ---- the rules of credentials ----

/** Some text without whitespace or `@`, then `@`, then dot-separated labels (at least two). */
const EMAIL_RE = /^[^\s@]{1,64}@[^\s@.]+(?:\.[^\s@.]+)+$/u;

/** Every e-mail is kept and compared trimmed and lower-cased. */
export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

/** Length in characters (code points), as JSON Schema's maxLength counts them. */
const charLength = (s: string): number => [...s].length;

/**
 * The problems of a new user's fields, as `/body/<field>` details; `email` must already be
 * normalised. Fields left undefined are not checked.
 */
export function credentialProblems(fields: {
  email?: string;
  password?: string;
  name?: string | null;
}): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  const { email, password, name } = fields;
  if (email !== undefined && (email.length > EMAIL_MAX_LENGTH || !EMAIL_RE.test(email))) {
    details.push({ path: '/body/email', message: 'must be an e-mail address' });
  }
  if (password !== undefined) {
    const n = charLength(password);
    if (n < PASSWORD_MIN_LENGTH) {
      details.push({ path: '/body/password', message: `must be at least ${PASSWORD_MIN_LENGTH} characters` });
    } else if (n > PASSWORD_MAX_LENGTH) {
      details.push({ path: '/body/password', message: `must be at most ${PASSWORD_MAX_LENGTH} characters` });
    }
  }
  if (name && charLength(name) > NAME_MAX_LENGTH) {
    details.push({ path: '/body/name', message: `must be at most ${NAME_MAX_LENGTH} characters` });
  }
  return details;
}

/** Throws the validation error of `details`, if any. */
export function throwIfProblems(details: ErrorDetail[]): void {
  const first = details[0];
  if (first) throw errors.validation(`${first.path}: ${first.message}`, details);
}

/** An optional display name: trimmed; blank means none. */
export const normalizeName = (name: string | undefined): string | null => name?.trim() || null;

/**
 * Inserts a user; an e-mail taken meanwhile (the unique constraint) is a conflict. The error
 * must end the caller's transaction: the failed statement has aborted it.
 */
export async function insertUserOrConflict(
  tx: Queryable,
  user: Parameters<typeof insertUser>[1] & { role: UserRole },
): Promise<UserListRow> {
  try {
    return await insertUser(tx, user);
  } catch (err) {
    if (isUniqueViolation(err)) throw emailTakenError(err);
    throw err;
  }
}

export const emailTakenError = (cause?: unknown) =>
  errors.conflict('An account with this e-mail address already exists', cause);

// ---- sessions ----

/** Opens a session for the user (inside the caller's transaction). */
export async function startSession(db: Queryable, userId: string, now: Date): Promise<NewSession> {
  const token = newToken();
  const csrfToken = newToken();
  const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
  await insertSession(db, { idHash: hashToken(token), userId, csrfToken, now, expiresAt });
  return { token, csrfToken, expiresAt };
}

/**
 * Signs a user in with e-mail and password. Any failure is `undefined`, and costs one password
 * verification whatever its cause, so neither the answer nor its timing tells whether the
 * account exists.
 */
export async function signIn(
  deps: Pick<Deps, 'db' | 'clock'>,
  input: { email: string; password: string },
): Promise<NewSession | undefined> {
  const email = normalizeEmail(input.email);
  // No account has a longer e-mail or password; a huge password is not hashed whole.
  const plausible = email.length <= EMAIL_MAX_LENGTH && charLength(input.password) <= PASSWORD_MAX_LENGTH;
  const password = plausible ? input.password : input.password.slice(0, PASSWORD_MAX_LENGTH);
  const user = plausible ? await findUserByEmail(deps.db, email) : undefined;
  const ok = user ? await verifyPassword(password, user.password_hash) : await dummyVerifyPassword(password);
  if (!user || !ok) return undefined;
  const now = deps.clock.now();
  return deps.db.transaction(async (tx) => {
    await deleteExpiredUserSessions(tx, user.id, now);
    await recordSignIn(tx, user.id, now);
    return startSession(tx, user.id, now);
  });
}

/** The user of a session token (the cookie's value); undefined when unknown or expired. Slides the session on. */
export async function viewerOfSession(
  deps: Pick<Deps, 'db' | 'clock'>,
  token: string | undefined,
): Promise<Viewer | undefined> {
  if (!token || token.length > 256) return undefined;
  const now = deps.clock.now();
  const row = await findSessionViewer(deps.db, {
    idHash: hashToken(token),
    now,
    slideTo: new Date(now.getTime() + SESSION_TTL_MS),
  });
  if (!row) return undefined;
  return {
    userId: row.user_id,
    organizationId: row.organization_id,
    email: row.email,
    name: row.name,
    role: row.role,
    csrfToken: row.csrf_token,
  };
}

/** Ends a session (idempotent). */
export async function signOut(deps: Pick<Deps, 'db'>, token: string): Promise<void> {
  if (!token || token.length > 256) return;
  await deleteSession(deps.db, hashToken(token));
}

/**
 * Password attempts (sign-in, sign-up, accepting an invitation) per client address and minute.
 * Each attempt costs a memory-hard hash, so this bounds both guessing and the work a flood of
 * attempts could cause; the counter is shared by every process.
 */
export const PASSWORD_ATTEMPTS_PER_MINUTE = 10;

/** Counts one password attempt from a client address: whether it is beyond this minute's limit. */
export async function tooManyPasswordAttempts(
  deps: Pick<Deps, 'db' | 'clock'>,
  clientAddress: string,
): Promise<boolean> {
  const hits = await countHit(deps.db, `password:${clientAddress}`, windowStart(deps.clock.now()));
  return hits > PASSWORD_ATTEMPTS_PER_MINUTE;
}
