// Who is signed in, and forms that cannot be forged. A session is an httpOnly cookie holding a
// random token (the database keeps only its hash). Every form carries a CSRF token: the
// session's own for signed-in pages, and for the sign-in/sign-up forms a random value that is
// also set as a cookie (double submit), since a cross-site form cannot read or set our cookies.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
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

/**
 * The scope of the signed-in pages: a request without a session never reaches their handlers.
 * Signed out, a page redirects to the sign-in page (and back afterwards); a fragment fetched by a
 * page's script gets a bare 401 instead, since fetch would follow a redirect and put the sign-in
 * page inside the form. The guard is a preHandler so that the dashboard's form checks (an
 * unreadable form, a missing CSRF token) answer first, as for every other form.
 */
export function sessionScope(
  signedOut: 'redirect' | 'unauthorized',
  pages: (scope: FastifyInstance) => void,
) {
  return async (scope: FastifyInstance): Promise<void> => {
    scope.addHook('preHandler', async (request, reply) => {
      if (request.viewer) return;
      if (signedOut === 'unauthorized') return reply.code(401).type('text/html; charset=utf-8').send('');
      return reply.redirect(`/login?next=${encodeURIComponent(request.url)}`, 303);
    });
    pages(scope);
  };
}

/** The signed-in person of a request inside the session scope. */
export function viewerOf(request: FastifyRequest): Viewer {
  if (!request.viewer) throw new Error('page reached without a signed-in viewer');
  return request.viewer;
}

/** Only paths of this site: `next` must not send the user elsewhere after signing in. */
export function safeNext(next: string | undefined): string {
  return next && /^\/dashboard(\/[\w\-/?=&%.]*)?$/.test(next) ? next : '/dashboard';
}
