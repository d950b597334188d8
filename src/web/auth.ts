// Who is signed in, and forms that cannot be forged. A session is an httpOnly cookie holding a
// random token (the database keeps only its hash). Every form carries a CSRF token: the
// session's own for signed-in pages, and for the sign-in/sign-up forms a random value that is
// also set as a cookie (double submit), since a cross-site form cannot read or set our cookies.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import { countHit } from '../db/sql/rate-limits.ts';
import type { Deps } from '../domain/deps.ts';
import { windowStart } from '../domain/rate-limit.ts';
import type { Viewer } from '../domain/users.ts';

export const SESSION_COOKIE = 'svc_session';
const FORM_COOKIE = 'svc_form';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in person of a dashboard request. */
    viewer?: Viewer;
  }
}

export type FormBody = Record<string, string | string[] | undefined>;

export function formOf(request: FastifyRequest): FormBody {
  return (request.body && typeof request.body === 'object' ? request.body : {}) as FormBody;
}

/** One value of a form field (the first when repeated), trimmed. */
export function field(form: FormBody, name: string): string {
  const v = form[name];
  return (Array.isArray(v) ? (v[0] ?? '') : (v ?? '')).trim();
}

/** Every value of a repeated field (checkbox groups, multi-selects). */
export function fields(form: FormBody, name: string): string[] {
  const v = form[name];
  return (Array.isArray(v) ? v : v === undefined ? [] : [v]).map((x) => x.trim()).filter(Boolean);
}

const same = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

export function cookieOptions(config: Config, maxAgeSeconds: number) {
  return {
    path: '/',
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: config.publicUrl.startsWith('https:'),
    maxAge: maxAgeSeconds,
  };
}

/** The token for an anonymous form, set as a cookie too; reuses the one already set. */
export function anonymousFormToken(request: FastifyRequest, reply: FastifyReply, config: Config): string {
  const existing = request.cookies[FORM_COOKIE];
  if (existing && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
  const token = randomBytes(32).toString('base64url');
  reply.setCookie(FORM_COOKIE, token, cookieOptions(config, 3600));
  return token;
}

/** Whether a posted form carries the right token (the session's, or the double-submit one). */
export function formIsGenuine(request: FastifyRequest): boolean {
  const sent = field(formOf(request), '_csrf');
  if (!sent) return false;
  if (request.viewer) return same(sent, request.viewer.csrfToken);
  const cookie = request.cookies[FORM_COOKIE];
  return cookie !== undefined && same(sent, cookie);
}

/** The signed-in person, or a redirect to the sign-in page (and undefined). */
export function viewerOrRedirect(request: FastifyRequest, reply: FastifyReply): Viewer | undefined {
  if (request.viewer) return request.viewer;
  const next = encodeURIComponent(request.url);
  void reply.redirect(`/login?next=${next}`, 303);
  return undefined;
}

/** Only paths of this site: `next` must not send the user elsewhere after signing in. */
export function safeNext(next: string | undefined): string {
  return next && /^\/dashboard(\/[\w\-/?=&%.]*)?$/.test(next) ? next : '/dashboard';
}

/**
 * Password attempts (sign-in, sign-up, accepting an invitation) per client address and minute.
 * Each attempt costs a memory-hard hash, so this bounds both guessing and the work a flood of
 * attempts could cause; the counter is shared by every process.
 */
export const PASSWORD_ATTEMPTS_PER_MINUTE = 10;

export async function tooManyPasswordAttempts(
  deps: Pick<Deps, 'db' | 'clock'>,
  request: FastifyRequest,
): Promise<boolean> {
  const hits = await countHit(deps.db, `password:${request.ip}`, windowStart(deps.clock.now()));
  return hits > PASSWORD_ATTEMPTS_PER_MINUTE;
}
