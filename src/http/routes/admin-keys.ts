import { Type } from 'typebox';
import { createCappedApiKey, listOrganizationKeys, revokeKey } from '../../domain/api-keys.ts';
import type { Deps } from '../../domain/deps.ts';
import { getOrganization } from '../../domain/organizations.ts';
import { errors } from '../../lib/errors.ts';
import { AdminApiKey, CreatedKey, CreateKeyBody, IdParams, KeyIdParams } from '../../schemas/admin.ts';
import { errorResponses } from '../../schemas/common.ts';
import { created } from '../links.ts';
import type { App } from '../types.ts';

const adminSchema = { tags: ['admin'], security: [{ adminToken: [] }] };

// Paths under /api/admin: registered in the admin scope (app.ts).
export function adminKeyRoutes(app: App, deps: Deps): void {
  app.post(
    '/organizations/:id/keys',
    {
      schema: {
        operationId: 'createApiKey',
        description:
          "Creates an API key for the organization; the key's value is in this response only and is stored as a hash. 403 when the organization has SVC_MAX_API_KEYS_PER_ORG keys that are not revoked.",
        ...adminSchema,
        summary: 'Create an API key; its value is in this response only',
        params: IdParams,
        body: CreateKeyBody,
        response: { 201: CreatedKey, ...errorResponses(400, 401, 403, 404, 413, 415) },
      },
    },
    async (request, reply) => {
      if (!(await getOrganization(deps, request.params.id))) throw errors.notFound('Organization');
      const expiresAt = request.body.expiresAt ? new Date(request.body.expiresAt) : null;
      if (expiresAt && expiresAt <= deps.clock.now()) {
        throw errors.validation('expiresAt must be in the future', [
          { path: '/body/expiresAt', message: 'must be in the future' },
        ]);
      }
      const { key, apiKey } = await createCappedApiKey(deps, {
        organizationId: request.params.id,
        name: request.body.name,
        expiresAt,
      });
      return created(request, reply, `/api/admin/keys/${key.id}`, {
        id: key.id,
        apiKey,
        name: key.name,
        prefix: key.prefix,
        createdAt: key.createdAt,
        expiresAt: key.expiresAt,
      });
    },
  );

  app.get(
    '/organizations/:id/keys',
    {
      schema: {
        operationId: 'listApiKeys',
        description:
          "The organization's keys with their names, prefixes, expiry, revocation and last use; never their values.",
        ...adminSchema,
        summary: "List an organization's keys (never their values)",
        params: IdParams,
        response: { 200: Type.Array(AdminApiKey), ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      if (!(await getOrganization(deps, request.params.id))) throw errors.notFound('Organization');
      return listOrganizationKeys(deps, request.params.id);
    },
  );

  app.delete(
    '/keys/:keyId',
    {
      schema: {
        operationId: 'revokeApiKey',
        description:
          'Revokes an API key: every process refuses it from the next request on. Idempotent: revoking again answers 204 and keeps the first revocation time.',
        ...adminSchema,
        summary: 'Revoke an API key (every process refuses it from the next request on)',
        params: KeyIdParams,
        response: { 204: Type.Null({ description: 'Revoked' }), ...errorResponses(400, 401, 404) },
      },
    },
    async (request, reply) => {
      if (!(await revokeKey(deps, request.params.keyId))) throw errors.notFound('API key');
      return reply.code(204).send(null);
    },
  );
}
