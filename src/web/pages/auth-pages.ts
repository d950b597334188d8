// Sign-up, sign-in, sign-out and accepting an invitation.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../domain/deps.ts';
import { tooManyPasswordAttempts } from '../../domain/sessions.ts';
import {
  acceptInvitation,
  invitationOf,
  type NewSession,
  SESSION_TTL_MS,
  signIn,
  signOut,
  signUp,
} from '../../domain/users.ts';
import { AppError } from '../../lib/errors.ts';
import { anonymousFormToken, cookieOptions, field, formOf, SESSION_COOKIE, safeNext } from '../auth.ts';
import { html } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import type { WebScope } from '../plugin.ts';

type Flash = { kind: 'ok' | 'error'; text: string } | undefined;

function startSession(reply: FastifyReply, deps: Deps, session: NewSession): void {
  reply.setCookie(
    SESSION_COOKIE,
    session.token,
    cookieOptions(deps.config, Math.floor(SESSION_TTL_MS / 1000)),
  );
}

function send(reply: FastifyReply, status: number, markup: string) {
  return reply.code(status).type('text/html; charset=utf-8').send(markup);
}

const slowDown = (reply: FastifyReply) =>
  send(
    reply.header('retry-after', '60'),
    429,
    page(
      { title: 'Too many attempts' },
      html`<h1>Too many attempts</h1><p>Wait a minute, then try again.</p>`,
    ),
  );

function loginPage(request: FastifyRequest, reply: FastifyReply, deps: Deps, flash: Flash, email = '') {
  const token = anonymousFormToken(request, reply, deps.config);
  const next = safeNext((request.query as { next?: string }).next ?? field(formOf(request), 'next'));
  return page(
    { title: 'Sign in', flash },
    html`<h1>Sign in</h1>
<form class="stack" method="post" action="/login">${csrfField(token)}
  <input type="hidden" name="next" value="${next}">
  <div><label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="username" required value="${email}"></div>
  <div><label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required></div>
  <div><button type="submit">Sign in</button></div>
</form>
${deps.config.signupEnabled ? html`<p>No account yet? <a href="/signup">Create an organization</a>.</p>` : ''}`,
  );
}

function signupPage(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: Deps,
  flash: Flash,
  values: Record<string, string> = {},
) {
  const token = anonymousFormToken(request, reply, deps.config);
  return page(
    { title: 'Sign up', flash },
    html`<h1>Create your organization</h1>
<form class="stack" method="post" action="/signup">${csrfField(token)}
  <div><label for="organizationName">Organization name</label><input id="organizationName" name="organizationName" required maxlength="255" value="${values.organizationName ?? ''}"></div>
  <div><label for="name">Your name</label><input id="name" name="name" autocomplete="name" maxlength="255" value="${values.name ?? ''}"></div>
  <div><label for="email">E-mail</label><input id="email" name="email" type="email" autocomplete="username" required value="${values.email ?? ''}"></div>
  <div><label for="password">Password (at least 10 characters)</label><input id="password" name="password" type="password" autocomplete="new-password" minlength="10" required></div>
  <div><button type="submit">Create organization</button></div>
</form>
<p>Already have an account? <a href="/login">Sign in</a>.</p>`,
  );
}

export function authPages(scope: WebScope, deps: Deps): void {
  scope.get('/login', async (request, reply) => {
    if (request.viewer) return reply.redirect('/dashboard', 303);
    return send(reply, 200, loginPage(request, reply, deps, undefined));
  });

  scope.post('/login', async (request, reply) => {
    if (await tooManyPasswordAttempts(deps, request.ip)) return slowDown(reply);
    const form = formOf(request);
    const session = await signIn(deps, { email: field(form, 'email'), password: field(form, 'password') });
    if (!session) {
      return send(
        reply,
        401,
        loginPage(
          request,
          reply,
          deps,
          { kind: 'error', text: 'Wrong e-mail or password.' },
          field(form, 'email'),
        ),
      );
    }
    startSession(reply, deps, session);
    return reply.redirect(safeNext(field(form, 'next')), 303);
  });

  scope.get('/signup', async (request, reply) => {
    if (!deps.config.signupEnabled) {
      return send(
        reply,
        403,
        page(
          { title: 'Sign-up is off' },
          html`<h1>Sign-up is turned off</h1><p>Ask your operator for an account.</p>`,
        ),
      );
    }
    return send(reply, 200, signupPage(request, reply, deps, undefined));
  });

  scope.post('/signup', async (request, reply) => {
    if (await tooManyPasswordAttempts(deps, request.ip)) return slowDown(reply);
    const form = formOf(request);
    const values = {
      organizationName: field(form, 'organizationName'),
      name: field(form, 'name'),
      email: field(form, 'email'),
    };
    try {
      const created = await signUp(deps, {
        email: values.email,
        password: field(form, 'password'),
        organizationName: values.organizationName,
        ...(values.name && { name: values.name }),
      });
      startSession(reply, deps, created.session);
      return reply.redirect('/dashboard/keys?welcome=1', 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return send(
        reply,
        err.status,
        signupPage(request, reply, deps, { kind: 'error', text: err.message }, values),
      );
    }
  });

  scope.post('/logout', async (request, reply) => {
    const token = request.cookies[SESSION_COOKIE];
    if (token) await signOut(deps, token);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return reply.redirect('/login', 303);
  });

  const invitePage = (
    request: FastifyRequest,
    reply: FastifyReply,
    token: string,
    invite: { email: string; organizationName: string },
    flash: Flash,
  ) =>
    page(
      { title: 'Join organization', flash },
      html`<h1>Join ${invite.organizationName}</h1>
<p>You were invited as <strong>${invite.email}</strong>. Choose a password to create your account.</p>
<form class="stack" method="post" action="/invite/${token}">${csrfField(anonymousFormToken(request, reply, deps.config))}
  <div><label for="name">Your name</label><input id="name" name="name" autocomplete="name" maxlength="255"></div>
  <div><label for="password">Password (at least 10 characters)</label><input id="password" name="password" type="password" autocomplete="new-password" minlength="10" required></div>
  <div><button type="submit">Join</button></div>
</form>`,
    );

  scope.get<{ Params: { token: string } }>('/invite/:token', async (request, reply) => {
    const invite = await invitationOf(deps, request.params.token);
    if (!invite) {
      return send(
        reply,
        404,
        page(
          { title: 'Invitation' },
          html`<h1>This invitation is not valid</h1><p>It may have expired or been used already.</p>`,
        ),
      );
    }
    return send(reply, 200, invitePage(request, reply, request.params.token, invite, undefined));
  });

  scope.post<{ Params: { token: string } }>('/invite/:token', async (request, reply) => {
    if (await tooManyPasswordAttempts(deps, request.ip)) return slowDown(reply);
    const form = formOf(request);
    try {
      const session = await acceptInvitation(deps, request.params.token, {
        password: field(form, 'password'),
        ...(field(form, 'name') && { name: field(form, 'name') }),
      });
      startSession(reply, deps, session);
      return reply.redirect('/dashboard', 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      const invite = await invitationOf(deps, request.params.token);
      if (!invite)
        return send(reply, 404, page({ title: 'Invitation' }, html`<h1>This invitation is not valid</h1>`));
      return send(
        reply,
        err.status,
        invitePage(request, reply, request.params.token, invite, { kind: 'error', text: err.message }),
      );
    }
  });
}
