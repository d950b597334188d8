import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { Authenticator } from '../../domain/authenticator.ts';
import type { Deps } from '../../domain/deps.ts';
import { rateLimitHeaders } from '../../domain/rate-limit.ts';
import { AppError, errors } from '../../lib/errors.ts';
import type { App, AuthMode } from '../types.ts';

function authModeOf(request: FastifyRequest): AuthMode {
  const configured = request.routeOptions.config?.auth;
  if (configured) return configured;
  // Unknown paths answer like their area: an unauthenticated caller learns nothing of routes.
  if (request.url.startsWith('/api/svc/')) return 'apiKey';
  if (request.url.startsWith('/api/admin/')) return 'admin';
  return 'public';
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Authentication and rate limiting, before the body is read:
 * - `apiKey`: the key is authenticated and the request counted (mostly in memory, see
 *   Authenticator); every answer carries the rate-limit headers, 401s included (counted per
 *   client address).
 * - `admin`: the operator token, compared in constant time; the area is absent (404) when no
 *   token is configured.
 * Then, once the request is validated, an `organizationId` in the query or body that is not the
 * key's organization is a 401, as the interface specification requires.
 */
export function installAuth(app: App, deps: Deps): void {
  const adminDigest = deps.config.adminToken ? digest(deps.config.adminToken) : undefined;
  const authenticator = new Authenticator(deps);

  app.addHook('onRequest', async (request, reply) => {
    const mode = authModeOf(request);
    if (mode === 'public') return;
    if (mode === 'admin') {
      if (!adminDigest) throw errors.notFound('Route');
      const m = /^Bearer[ ]+(\S+)$/i.exec(request.headers.authorization ?? '');
      if (!m?.[1] || !timingSafeEqual(digest(m[1]), adminDigest)) {
        throw new AppError('unauthorized', 'Invalid or missing admin token');
      }
      return;
    }
    const outcome = await authenticator.authenticate(request.headers.authorization, request.ip);
    reply.headers(rateLimitHeaders(outcome.rate));
    if (outcome.rate.exceeded) throw errors.rateLimited(outcome.rate.retryAfter);
    if (!outcome.ok) throw errors.unauthorized();
    request.principal = outcome.principal;
  });

  app.addHook('preHandler', async (request) => {
    const principal = request.principal;
    if (!principal) return;
    for (const part of [request.query, request.body]) {
      if (part && typeof part === 'object' && 'organizationId' in part) {
        const claimed = (part as { organizationId: unknown }).organizationId;
        // uuids compare case-insensitively (the database stores them lowercase).
        if (typeof claimed !== 'string' || claimed.toLowerCase() !== principal.organizationId) {
          throw errors.unauthorized();
        }
      }
    }
  });
}
