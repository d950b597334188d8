// POST /sources/{id}/connect, for the API and the dashboard alike: the sign-in a source's
// authType starts. The one place that tells the authTypes apart. It lives beside the runner
// because an OAuth sign-in starts with the runner's outbound requests (discovery, registration).
import { findSource } from '../db/sql/sources.ts';
import { startConnectorConnect } from '../domain/connectors.ts';
import type { Deps } from '../domain/deps.ts';
import { errors } from '../lib/errors.ts';
import type { SourceConnectResult } from '../schemas/source.ts';
import { startOAuthConnect } from './source-oauth.ts';

/** The URL where the person signs in; 404 for a source of another organization, 409 without a sign-in. */
export async function startSourceConnect(
  deps: Deps,
  organizationId: string,
  sourceId: string,
): Promise<SourceConnectResult> {
  const source = await findSource(deps.db, organizationId, sourceId);
  if (!source) throw errors.notFound('Source');
  switch (source.auth_type) {
    case 'connector':
      return startConnectorConnect(deps, source);
    case 'oauth':
      return startOAuthConnect(deps, source);
    default:
      throw errors.conflict(
        `source "${source.name}" has authType ${source.auth_type ?? 'none'}, which has no sign-in to start; only oauth and connector sources connect`,
      );
  }
}
