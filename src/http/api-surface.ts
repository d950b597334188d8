// What only the api role serves: the routes under /api/svc and /api/admin, the OpenAPI document
// and its reference page, the Stripe webhook and the dashboard. app.ts imports this module
// dynamically for the `full` surface only, so that a scheduler or worker process (the
// `operations` surface) does not load this code and what it imports (the Stripe SDK, the MCP
// server, swagger, markdown rendering, every resource schema).
import type { Deps } from '../domain/deps.ts';
import { mcpRoutes } from './mcp/endpoint.ts';
import { adminKeyRoutes } from './routes/admin-keys.ts';
import { adminOrganizationRoutes } from './routes/admin-organizations.ts';
import { adminUserRoutes } from './routes/admin-users.ts';
import { billingRoutes } from './routes/billing.ts';
import { billingStatusRoutes } from './routes/billing-status.ts';
import { destinationRoutes } from './routes/destinations.ts';
import { modelRoutes } from './routes/models.ts';
import { runRoutes } from './routes/runs.ts';
import { scheduleRoutes } from './routes/schedules.ts';
import { skillRoutes } from './routes/skills.ts';
import { sourceConnectRoutes } from './routes/source-connect.ts';
import { sourceRoutes } from './routes/sources.ts';
import { statsRoutes } from './routes/stats.ts';
import { taskRoutes } from './routes/tasks.ts';
import type { App } from './types.ts';

export { ErrorEnvelope } from '../schemas/common.ts';
export { dashboard } from '../web/plugin.ts';
export { installOpenApi, installOpenApiRoutes } from './plugins/openapi.ts';
export { stripeWebhookRoutes } from './routes/billing.ts';
export { healthSchemas } from './routes/health-schemas.ts';
export { connectorCallbackRoutes } from './routes/source-connect.ts';

type RouteModule = (scope: App, deps: Deps) => void;

/** The admin API's routes (/api/admin), in the admin scope. */
export const adminRouteModules: readonly RouteModule[] = [
  adminOrganizationRoutes,
  adminKeyRoutes,
  adminUserRoutes,
];

/** The API's routes (/api/svc), in the API-key scope. */
export const apiKeyRouteModules: readonly RouteModule[] = [
  taskRoutes,
  destinationRoutes,
  runRoutes,
  scheduleRoutes,
  statsRoutes,
  skillRoutes,
  sourceRoutes,
  sourceConnectRoutes,
  modelRoutes,
  billingStatusRoutes,
  billingRoutes,
  mcpRoutes,
];
