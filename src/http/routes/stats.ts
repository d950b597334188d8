import type { Deps } from '../../domain/deps.ts';
import { organizationStatistics } from '../../domain/stats.ts';
import { errorResponses, OrganizationQuery } from '../../schemas/common.ts';
import { Stats } from '../../schemas/stats.ts';
import { type App, principalOf } from '../types.ts';

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function statsRoutes(app: App, deps: Deps): void {
  app.get(
    '/stats',
    {
      schema: {
        operationId: 'getStats',
        description:
          "The organization's tasks (active and total), runs (total, completed, failed), tokens and cost.",
        tags: ['stats'],
        summary: 'Usage statistics of the organization',
        querystring: OrganizationQuery,
        response: { 200: Stats, ...errorResponses(400, 401, 429) },
      },
    },
    async (request) => organizationStatistics(deps, principalOf(request).organizationId),
  );
}
