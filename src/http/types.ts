import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Principal } from '../domain/authenticator.ts';

export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/**
 * How a route is authenticated: `apiKey` (an organization's key; the default under
 * /api/svc/), `admin` (the operator token) or `public`.
 */
export type AuthMode = 'apiKey' | 'admin' | 'public';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthMode;
  }
  interface FastifyInstance {
    /** Every route registered on the app (method and URL template). */
    registeredRoutes: { method: string; url: string }[];
  }
  interface FastifyRequest {
    /** Set by the API-key hook on authenticated /api/svc/ requests. */
    principal?: Principal;
  }
}

/** The authenticated organization of a request that passed the API-key hook. */
export function principalOf(request: { principal?: Principal | undefined }): Principal {
  if (!request.principal) throw new Error('route reached without an authenticated principal');
  return request.principal;
}
