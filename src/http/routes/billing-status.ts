import { billingStatus } from '../../domain/billing.ts';
import type { Deps } from '../../domain/deps.ts';
import { BillingStatus } from '../../schemas/billing.ts';
import { errorResponses, OrganizationQuery } from '../../schemas/common.ts';
import { type App, principalOf } from '../types.ts';

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function billingStatusRoutes(app: App, deps: Deps): void {
  app.get(
    '/billing/status',
    {
      schema: {
        operationId: 'getBillingStatus',
        description:
          "The organization's plan, subscription state, effective limits and usage in the current billing period.",
        tags: ['billing'],
        summary: 'Subscription, limits and usage of the organization',
        querystring: OrganizationQuery,
        response: { 200: BillingStatus, ...errorResponses(400, 401, 429) },
      },
    },
    async (request) => billingStatus(deps, principalOf(request).organizationId),
  );
}
