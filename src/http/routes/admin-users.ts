import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import { getOrganization } from '../../domain/organizations.ts';
import { createUser, listMembers } from '../../domain/users.ts';
import { errors } from '../../lib/errors.ts';
import { AdminUser, CreatedUser, CreateUserBody, IdParams } from '../../schemas/admin.ts';
import { errorResponses } from '../../schemas/common.ts';
import { created } from '../links.ts';
import type { App } from '../types.ts';

const adminSchema = { tags: ['admin'], security: [{ adminToken: [] }] };

// Paths under /api/admin: registered in the admin scope (app.ts).
export function adminUserRoutes(app: App, deps: Deps): void {
  app.post(
    '/organizations/:id/users',
    {
      schema: {
        operationId: 'createUser',
        description:
          "Creates a dashboard user of the organization with a password. 409 when the email is taken; 403 when the plan's user limit is reached.",
        ...adminSchema,
        summary: 'Create a user of the organization (who can then sign in to the dashboard)',
        params: IdParams,
        body: CreateUserBody,
        response: { 201: CreatedUser, ...errorResponses(400, 401, 403, 404, 409, 413, 415) },
      },
    },
    async (request, reply) => {
      const user = await createUser(deps, request.params.id, request.body);
      // A user has no URL of its own: the list it appears in is where it is found.
      return created(request, reply, `/api/admin/organizations/${request.params.id}/users`, user);
    },
  );

  app.get(
    '/organizations/:id/users',
    {
      schema: {
        operationId: 'listUsers',
        description: "The organization's users; never their password hashes.",
        ...adminSchema,
        summary: "List an organization's users (never their password hashes)",
        params: IdParams,
        response: { 200: Type.Array(AdminUser), ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      if (!(await getOrganization(deps, request.params.id))) throw errors.notFound('Organization');
      return listMembers(deps, request.params.id);
    },
  );
}
