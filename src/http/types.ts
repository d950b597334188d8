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

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered on the app (method and URL template). */
    registeredRoutes: { method: string; url: string }[];
  }
  interface FastifyRequest {
    /** Set by the API-key scope's guard on authenticated /api/svc/ requests. */
    principal?: Principal;
  }
}

/** The authenticated organization of a request that passed the API-key scope's guard. */
export function principalOf(request: { principal?: Principal | undefined }): Principal {
  if (!request.principal) throw new Error('route reached without an authenticated principal');
  return request.principal;
}
