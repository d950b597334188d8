// The dashboard: server-rendered pages served by the api role, in their own Fastify scope
// (cookies and form bodies are understood here, not by the JSON API).
import cookie from '@fastify/cookie';
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../domain/deps.ts';
import { viewerOfSession } from '../domain/users.ts';
import { formIsGenuine, SESSION_COOKIE, sessionScope } from './auth.ts';
import { dashboardCsp } from './csp.ts';
import { formProblem, installFormParsing, showFormAgain } from './form-input.ts';
import { html } from './html.ts';
import { page } from './layout.ts';
import { authPages } from './pages/auth-pages.ts';
import { billingPages } from './pages/billing.ts';
import { keyPages } from './pages/keys.ts';
import { memberPages } from './pages/members.ts';
import { runPages } from './pages/runs.ts';
import { skillPages } from './pages/skills.ts';
import { oauthCallbackPage } from './pages/source-oauth.ts';
import { sourcePages } from './pages/sources.ts';
import { scheduleFragments, taskPages } from './pages/tasks.ts';

export type WebScope = FastifyInstance;

/**
 * The dashboard's scope: its public pages (sign-in, sign-up, invitations) and, nested, the
 * session scope of every signed-in page (auth.ts), so a page cannot be mounted without it.
 */
export function dashboard(deps: Deps) {
  return async (scope: WebScope): Promise<void> => {
    // Pages are not part of the API: keep them out of the OpenAPI document.
    scope.addHook('onRoute', (route) => {
      route.schema = { ...(route.schema ?? {}), hide: true };
    });
    await scope.register(cookie);
    await installFormParsing(scope);

    // Set first, so that every answer of the scope carries them (errors and redirects too).
    // Pages are never cached (they hold private data), never framed, and load only what
    // csp.ts allows.
    scope.addHook('onRequest', async (request, reply) => {
      reply.header('cache-control', 'no-store');
      reply.header('x-frame-options', 'DENY');
      reply.header('referrer-policy', 'same-origin');
      reply.header('x-content-type-options', 'nosniff');
      reply.header('content-security-policy', dashboardCsp());
      const viewer = await viewerOfSession(deps, request.cookies[SESSION_COOKIE]);
      if (viewer) request.viewer = viewer;
    });
    // A form that cannot be read is shown again (see form-input.ts); every form post must carry
    // its CSRF token.
    scope.addHook('preHandler', async (request, reply) => {
      const problem = request.method === 'POST' ? formProblem(request) : undefined;
      if (problem) return showFormAgain(request, reply, problem);
      if (request.method === 'POST' && !formIsGenuine(request)) {
        reply.code(403).type('text/html');
        return reply.send(
          page(
            { title: 'Form expired', viewer: request.viewer },
            html`<h1>This form has expired</h1><p>Go back, reload the page and send it again.</p>`,
          ),
        );
      }
    });

    scope.get('/', async (_request, reply) => reply.redirect('/dashboard', 302));
    authPages(scope, deps);
    oauthCallbackPage(scope, deps);
    await scope.register(
      sessionScope('redirect', (pages) => {
        billingPages(pages, deps);
        keyPages(pages, deps);
        memberPages(pages, deps);
        taskPages(pages, deps);
        runPages(pages, deps);
        skillPages(pages, deps);
        sourcePages(pages, deps);
      }),
    );
    await scope.register(sessionScope('unauthorized', (fragments) => scheduleFragments(fragments, deps)));
  };
}
