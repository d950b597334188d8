import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import {
  createOrganization,
  getOrganization,
  listAllOrganizations,
  patchOrganization,
} from '../../domain/organizations.ts';
import { errors } from '../../lib/errors.ts';
import {
  AdminOrganization,
  CreatedOrganization,
  CreateOrganizationBody,
  IdParams,
  PatchOrganizationBody,
} from '../../schemas/admin.ts';
import { errorResponses } from '../../schemas/common.ts';
import { created } from '../links.ts';
import type { App } from '../types.ts';

const adminSchema = { tags: ['admin'], security: [{ adminToken: [] }] };

// Paths under /api/admin: registered in the admin scope (app.ts).
export function adminOrganizationRoutes(app: App, deps: Deps): void {
  app.post(
    '/organizations',
    {
      schema: {
        operationId: 'createOrganization',
        description:
          'Creates an organization on a plan and answers its first API key and its webhook signing secret; both are shown in this response only.',
        ...adminSchema,
        summary: 'Create an organization with its first API key and webhook secret',
        body: CreateOrganizationBody,
        response: { 201: CreatedOrganization, ...errorResponses(400, 401, 413, 415) },
      },
    },
    async (request, reply) => {
      const made = await createOrganization(deps, request.body);
      return created(request, reply, `/api/admin/organizations/${made.organization.id}`, {
        organizationId: made.organization.id,
        apiKey: made.apiKey,
        webhookSecret: made.webhookSecret,
      });
    },
  );

  app.get(
    '/organizations',
    {
      schema: {
        operationId: 'listOrganizations',
        description:
          'Every organization on this server, with its plan and effective limits. Operator token only.',
        ...adminSchema,
        summary: 'List organizations',
        response: { 200: Type.Array(AdminOrganization), ...errorResponses(401) },
      },
    },
    async () => listAllOrganizations(deps),
  );

  app.get(
    '/organizations/:id',
    {
      schema: {
        operationId: 'getOrganization',
        description: 'One organization with its plan, its limit overrides and the limits in effect.',
        ...adminSchema,
        summary: 'Get an organization with its plan and effective limits',
        params: IdParams,
        response: { 200: AdminOrganization, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const org = await getOrganization(deps, request.params.id);
      if (!org) throw errors.notFound('Organization');
      return org;
    },
  );

  app.patch(
    '/organizations/:id',
    {
      schema: {
        operationId: 'updateOrganization',
        description:
          'Changes the plan or overrides single limits (null removes an override and the plan default applies again).',
        ...adminSchema,
        summary: 'Change the plan or override limits (enterprise)',
        params: IdParams,
        body: PatchOrganizationBody,
        response: { 200: AdminOrganization, ...errorResponses(400, 401, 404, 413, 415) },
      },
    },
    async (request) => {
      const org = await patchOrganization(deps, request.params.id, request.body);
      if (!org) throw errors.notFound('Organization');
      return org;
    },
  );
}
