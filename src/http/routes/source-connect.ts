import type { Deps } from '../../domain/deps.ts';
import { startSourceConnect } from '../../runner/source-oauth.ts';
import { errorResponses } from '../../schemas/common.ts';
import { SourceIdParams } from '../../schemas/source.ts';
import { SourceConnectResult } from '../../schemas/source-connect.ts';
import { type App, principalOf } from '../types.ts';

// Path under /api/svc: registered in the API-key scope (app.ts).
export function sourceConnectRoutes(app: App, deps: Deps): void {
  app.post(
    '/sources/:sourceId/connect',
    {
      schema: {
        operationId: 'connectSource',
        description:
          "Starts the OAuth sign-in of a source with authType oauth (an mcp source of the http transport, or an api source whose authConfig names the provider's endpoints): discovers the server's authorization server, registers a client if needed (or uses the operator's, SVC_OAUTH_CLIENTS) and answers the authorization URL to open. The callback under SVC_PUBLIC_URL completes it; the source then turns active with lastConnectedAt set.",
        tags: ['sources'],
        summary: 'Start the OAuth sign-in of a source: answers the URL to open in a browser',
        params: SourceIdParams,
        response: { 200: SourceConnectResult, ...errorResponses(400, 401, 404, 429, 502) },
      },
    },
    async (request) => startSourceConnect(deps, principalOf(request).organizationId, request.params.sourceId),
  );
}
