import { Type } from 'typebox';
import { completeConnectorCallback } from '../../domain/connectors.ts';
import type { Deps } from '../../domain/deps.ts';
import { startSourceConnect } from '../../runner/source-connect.ts';
import { errorResponses } from '../../schemas/common.ts';
import { SourceConnectResult, SourceIdParams } from '../../schemas/source.ts';
import { type App, principalOf } from '../types.ts';

const tags = ['sources'];

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function sourceConnectRoutes(app: App, deps: Deps): void {
  app.post(
    '/sources/:sourceId/connect',
    {
      schema: {
        operationId: 'connectSource',
        description:
          "Starts the sign-in of a source and answers the URL to open in a browser. For authType oauth (an mcp source over http, or an api source whose authConfig names the provider's endpoints): discovers the server's authorization server, registers a client if needed (or uses the operator's, SVC_OAUTH_CLIENTS) and answers the authorization URL; the callback under SVC_PUBLIC_URL completes it, and the source then turns active with lastConnectedAt set. For authType connector: the connector provider's sign-in page, which sends the person back to the service; connectorConnected then becomes true. 409 for a source whose authType has no sign-in or a connector source that names no toolkit; 502 when the authorization server cannot be reached or answers badly; 503 connector_not_configured without a connector provider.",
        tags,
        summary: 'Start the sign-in of an oauth or connector source: the URL to open in a browser',
        params: SourceIdParams,
        response: { 200: SourceConnectResult, ...errorResponses(400, 401, 404, 409, 429, 502, 503) },
      },
    },
    async (request) => startSourceConnect(deps, principalOf(request).organizationId, request.params.sourceId),
  );
}

// A public path: the provider's sign-in page sends the browser here, with no API key.
export function connectorCallbackRoutes(app: App, deps: Deps): void {
  app.get(
    '/api/svc/connectors/callback',
    {
      schema: {
        operationId: 'connectorCallback',
        description:
          "Where the connector provider sends the person back after signing in (the state is sealed by the service and names the source; it holds for an hour). Asks the provider for the source's state, stores it, and redirects to the source's dashboard page. Not for API clients.",
        tags,
        summary: 'The return from a connector sign-in (no API key; redirects to the dashboard)',
        security: [],
        querystring: Type.Object({ state: Type.String({ minLength: 1, maxLength: 2048 }) }),
        response: {
          303: Type.Null({ description: "Redirect to the source's dashboard page" }),
          ...errorResponses(400, 404, 503),
        },
      },
    },
    async (request, reply) => {
      const { sourceId, connected } = await completeConnectorCallback(deps, request.query.state);
      const done = connected ? 'connected' : 'not-connected';
      return reply.redirect(`/dashboard/sources/${sourceId}?done=${done}`, 303);
    },
  );
}
