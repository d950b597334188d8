import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Type } from 'typebox';
import type { Authenticator } from '../../domain/authenticator.ts';
import { rateLimitHeaders } from '../../domain/rate-limit.ts';
import { errors } from '../../lib/errors.ts';
import { errorResponses } from '../../schemas/common.ts';
import type { App } from '../types.ts';
import { completeDocument, type NamedResponses, TAGS } from './openapi-document.ts';

/** Methods whose requests Fastify parses a body for, whether or not the route takes one. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** What body parsing answers: malformed JSON, a body over the limit, a media type other than JSON. */
const BODY_PARSING_STATUSES = [400, 413, 415];

/**
 * The OpenAPI 3.1 document is generated from the route schemas, which are also what validates
 * requests and serialises responses: one source for all three.
 * Must be registered before the routes it describes, after the ErrorEnvelope schema (app.ts).
 */
export async function installOpenApi(app: App, publicUrl: string): Promise<void> {
  // Body parsing runs before any handler on every route of these methods, so a route without a
  // body (POST .../run, DELETE ...) still answers 400, 413 or 415 when a client sends one: the
  // document says so for every such route.
  const named: NamedResponses = new Map();
  app.addHook('onRoute', (route) => {
    const response = route.schema?.response as Record<string, unknown> | undefined;
    if (!response) return;
    // A response schema that is a named resource (a `$id`) is its component in the document
    // (@fastify/swagger inlines a route's top-level schemas), so generators name its type.
    const operationId = (route.schema as { operationId?: string }).operationId;
    for (const [status, schema] of Object.entries(response)) {
      const id = (schema as { $id?: unknown } | undefined)?.$id;
      if (operationId && typeof id === 'string') {
        named.set(operationId, { ...named.get(operationId), [status]: id });
      }
    }
    if (![route.method].flat().some((m) => BODY_METHODS.has(m))) return;
    for (const status of BODY_PARSING_STATUSES) response[status] ??= Type.Ref('ErrorEnvelope');
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Scheduled AI Task Service',
        version: '0.1.0',
        description:
          'Runs scheduled AI tasks for organizations. Authenticate with `Authorization: Bearer <API key>`. ' +
          'Errors share one envelope: `{ "error": { "code", "message", "details"? } }`.',
        contact: { name: 'The operator of this service', url: publicUrl },
        // package.json's UNLICENSED: the service is proprietary; SPDX names such a licence LicenseRef-*.
        license: { name: 'Proprietary (UNLICENSED)', identifier: 'LicenseRef-Proprietary' },
      },
      servers: [{ url: publicUrl, description: 'This service (SVC_PUBLIC_URL)' }],
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'An organization API key (sats_...)' },
          adminToken: { type: 'http', scheme: 'bearer', description: 'The operator token, SVC_ADMIN_TOKEN' },
        },
      },
      security: [{ apiKey: [] }],
      tags: TAGS,
    },
    transformObject: (document) =>
      'openapiObject' in document ? completeDocument(document.openapiObject, named) : document.swaggerObject,
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
}

/**
 * The document and its reference page; registered after the routes. Public, yet counted like
 * every request under /api/svc: in the client address's bucket (the one of requests without a
 * usable key), with the rate-limit headers on every answer and 429 past the limit.
 */
export async function installOpenApiRoutes(app: App, authenticator: Authenticator): Promise<void> {
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (request, reply) => {
      const rate = await authenticator.countAddress(request.ip);
      reply.headers(rateLimitHeaders(rate));
      if (rate.exceeded) throw errors.rateLimited(rate.retryAfter);
    });
    await describeRoutes(scope, app);
  });
}

async function describeRoutes(scope: App, app: App): Promise<void> {
  scope.get(
    '/api/svc/openapi.json',
    {
      schema: {
        operationId: 'getOpenApiDocument',
        description:
          'The OpenAPI 3.1 description of every API operation, generated from the schemas that validate requests and responses. Public, like the reference page at /api/svc/docs.',
        tags: ['operations'],
        summary: 'This OpenAPI 3.1 document',
        security: [],
        response: { 200: Type.Object({}, { additionalProperties: true }), ...errorResponses(429) },
      },
    },
    async () => app.swagger(),
  );
  // The reference page and its assets are public, like the document they render.
  await scope.register(async (ui) => {
    // In this scope only (the page and its assets): the document itself keeps the API's
    // deny-all policy. Added before the plugin, so that its routes inherit the hook.
    ui.addHook('onSend', async (request, reply) => {
      reply.header('content-security-policy', referencePagePolicy(request.protocol === 'https'));
    });
    await ui.register(swaggerUi, {
      routePrefix: '/api/svc/docs',
      uiConfig: { docExpansion: 'list', deepLinking: true },
      // The policy is set by the hook above, per request, rather than by the plugin's fixed one.
      staticCSP: false,
    });
  });
}

/**
 * The reference page's Content-Security-Policy: the plugin's own, tightened (the validator badge
 * is off, so its remote host is not needed, and the page is never framed). It asks the browser to
 * upgrade the page's requests to https only when the request came over https, on the socket or
 * per the X-Forwarded-Proto of a trusted proxy (SVC_TRUST_PROXY_HOPS): served over plain http
 * under any host name but localhost, an upgrade would fetch the page's scripts from an https
 * origin that does not exist, and the page would stay blank.
 */
export function referencePagePolicy(https: boolean): string {
  const policy = [
    "default-src 'self'",
    "base-uri 'self'",
    "font-src 'self' https: data:",
    "frame-ancestors 'none'",
    "img-src 'self' data:",
    "object-src 'none'",
    "script-src 'self'",
    "script-src-attr 'none'",
    // The one <style> element Swagger UI's bundle writes as it renders (Chromium names its hash;
    // test/openapi-docs-page.test.ts fails on any refusal, so an upgrade that changes it shows).
    "style-src 'self' https: 'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='",
  ];
  if (https) policy.push('upgrade-insecure-requests');
  return policy.join('; ');
}
