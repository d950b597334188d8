// The authenticated areas of the API as Fastify scopes: each is an encapsulated plugin that
// installs its guard and then registers its routes, so a route of the area cannot be mounted
// without the guard. Each scope also answers its unknown paths itself, after the guard: an
// unauthenticated caller learns nothing of which routes exist.
import { createHash, timingSafeEqual } from 'node:crypto';
import { Authenticator, type AuthOutcome } from '../../domain/authenticator.ts';
import type { Deps } from '../../domain/deps.ts';
import { rateLimitHeaders } from '../../domain/rate-limit.ts';
import { AppError, errors } from '../../lib/errors.ts';
import type { App } from '../types.ts';
import { installConditionalRequests } from './conditional.ts';
import { answerNotFound } from './errors.ts';
import { installIdempotency } from './idempotency.ts';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** What registers an area's routes on its scope. */
export type Routes = (scope: App) => void | Promise<void>;

/**
 * Routes for an organization's API key, under the scope's prefix (/api/svc). Before the body is
 * read, the key is authenticated and the request counted (mostly in memory, see Authenticator);
 * every answer carries the rate-limit headers, 401s included (counted per client address).
 * Then, once the request is validated, an `organizationId` in the query or body that is not the
 * key's organization is a 401, as the interface specification requires.
 */
export function apiKeyScope(deps: Deps, routes: Routes, authenticator = new Authenticator(deps)) {
  return async (scope: App): Promise<void> => {
    // A callback, not an async function: most requests are decided from memory at once (see
    // Authenticator.authenticate); only the others wait.
    scope.addHook('onRequest', (request, reply, done) => {
      const admit = (outcome: AuthOutcome): void => {
        reply.headers(rateLimitHeaders(outcome.rate));
        if (outcome.rate.exceeded) done(errors.rateLimited(outcome.rate.retryAfter));
        else if (!outcome.ok) done(errors.unauthorized());
        else {
          request.principal = outcome.principal;
          done();
        }
      };
      const outcome = authenticator.authenticate(request.headers.authorization, () => request.ip);
      if (outcome instanceof Promise) outcome.then(admit, done);
      else admit(outcome);
    });

    // A callback, not an async function: it never waits (see app.ts).
    scope.addHook('preHandler', (request, _reply, done) => {
      const principal = request.principal;
      if (!principal) return done();
      for (const part of [request.query, request.body]) {
        if (part && typeof part === 'object' && 'organizationId' in part) {
          const claimed = (part as { organizationId: unknown }).organizationId;
          // uuids compare case-insensitively (the database stores them lowercase).
          if (typeof claimed !== 'string' || claimed.toLowerCase() !== principal.organizationId) {
            return done(errors.unauthorized());
          }
        }
      }
      done();
    });
    // After the organization checks above; see plugins/idempotency.ts.
    installIdempotency(scope, deps);
    installConditionalRequests(scope);

    scope.setNotFoundHandler(answerNotFound);
    await routes(scope);
  };
}

/**
 * Routes for the operator token (SVC_ADMIN_TOKEN), compared in constant time, under the scope's
 * prefix (/api/admin). The area is absent (404) when no token is configured.
 */
export function adminScope(deps: Deps, routes: Routes) {
  return async (scope: App): Promise<void> => {
    const adminDigest = deps.config.adminToken ? digest(deps.config.adminToken) : undefined;
    scope.addHook('onRequest', async (request) => {
      if (!adminDigest) throw errors.notFound('Route');
      const m = /^Bearer[ ]+(\S+)$/i.exec(request.headers.authorization ?? '');
      if (!m?.[1] || !timingSafeEqual(digest(m[1]), adminDigest)) {
        throw new AppError('unauthorized', 'Invalid or missing admin token');
      }
    });

    scope.setNotFoundHandler(answerNotFound);
    await routes(scope);
  };
}

/**
 * Routes anyone may call: operations, the API's description, the Stripe webhook (which checks
 * its own signature) and the dashboard's sign-in pages. A scope of its own, so that being public
 * is where a route is registered, like every other level.
 */
export function publicScope(routes: Routes) {
  return async (scope: App): Promise<void> => {
    await routes(scope);
  };
}
