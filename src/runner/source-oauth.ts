// OAuth sign-ins of sources, end to end: starting one (POST /sources/{id}/connect, the
// dashboard's Connect), completing it (the callback under SVC_PUBLIC_URL), and, for each run,
// an access token that works: refreshed shortly before it expires and when the server answers
// 401. A refresh the provider refuses expires the connection (domain/source-oauth.ts), which
// makes the source inactive and tells the task's destinations once.
import { OAuthError, ServerError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import {
  claimSourceOAuthRefresh,
  findSourceOAuth,
  releaseSourceOAuthRefresh,
  type SourceOAuthRow,
  saveConnectedSourceOAuth,
  saveRefreshedSourceOAuth,
} from '../db/sql/source-oauth.ts';
import { findSource, type SourceRow } from '../db/sql/sources.ts';
import type { Deps } from '../domain/deps.ts';
import {
  expireConnection,
  newState,
  oauthCallbackUrl,
  openConnection,
  savePendingSignIn,
  sealConnection,
  takePendingSignIn,
} from '../domain/source-oauth.ts';
import { errors } from '../lib/errors.ts';
import { outboundFetch } from '../lib/outbound.ts';
import {
  type ApiEndpoints,
  accessExpiresAt,
  beginAuthorization,
  completeAuthorization,
  type OAuthClientOptions,
  type OAuthConnection,
  oauthFetch,
  refreshConnection,
} from './tools/oauth-client.ts';
import { redact } from './tools/redact.ts';

/** A token this close to its end is refreshed before the run uses it. */
const REFRESH_MARGIN_MS = 60_000;
/** One refresh of a source at a time: the lease outlasts a refresh's requests (15 s each). */
const REFRESH_LEASE_MS = 30_000;
const REFRESH_POLL_MS = 200;

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

type OAuthDeps = Pick<Deps, 'config' | 'db' | 'clock' | 'secretBox' | 'log'>;
type SourceLike = Pick<
  SourceRow,
  'id' | 'organization_id' | 'name' | 'type' | 'config' | 'auth_type' | 'auth_config'
>;

/** What the callback needs besides the code: sealed with the state. */
interface PendingSignIn {
  codeVerifier: string;
  connection: OAuthConnection;
}

/** Where the source's tokens are for: the MCP server's URL or the api's base URL. */
function serverUrlOf(source: SourceLike): string | undefined {
  return source.type === 'api' ? source.config.baseUrl : source.config.url;
}

/**
 * The options of the SDK client for a source, or a problem (safe to show) why the source cannot
 * sign in with OAuth.
 */
function clientOptions(
  deps: OAuthDeps,
  source: SourceLike,
  connection: OAuthConnection,
): OAuthClientOptions | string {
  if (source.auth_type !== 'oauth') return 'its authType is not oauth; set authType oauth to connect it';
  const ac = source.auth_config ?? {};
  const provider = ac.provider;
  const operatorClient = provider === undefined ? undefined : deps.config.oauthClients.get(provider);
  if (provider !== undefined && !operatorClient && source.type === 'api')
    return `authConfig.provider "${provider}" is not one of the OAuth clients this service has (SVC_OAUTH_CLIENTS)`;
  let api: ApiEndpoints | undefined;
  if (source.type === 'api') {
    if (!ac.authorizationUrl || !ac.tokenUrl)
      return 'an api source signs in with the endpoints authConfig names: set authConfig.authorizationUrl and authConfig.tokenUrl';
    if (!operatorClient)
      return 'an api source signs in with a client the operator registered: set authConfig.provider to one of SVC_OAUTH_CLIENTS';
    api = {
      authorizationUrl: ac.authorizationUrl,
      tokenUrl: ac.tokenUrl,
      ...(ac.scope && { scope: ac.scope }),
    };
  } else if (source.type !== 'mcp' || (source.config.transport ?? 'http') !== 'http') {
    return 'OAuth sign-in is for mcp sources of the http transport and api sources';
  }
  return {
    connection,
    redirectUrl: oauthCallbackUrl(deps.config.publicUrl),
    ...(operatorClient && { operatorClient }),
    ...(api && { api }),
    ...(ac.scope && { scope: ac.scope }),
    fetch: oauthFetch(outboundFetch(deps.config)),
  };
}

/** An SDK or network failure in words that carry no secret. */
function failureText(err: unknown, secrets: readonly string[]): string {
  const text =
    err instanceof OAuthError
      ? `${err.errorCode}: ${err.message}`
      : err instanceof Error
        ? err.message
        : String(err);
  return redact(text, secrets).slice(0, 500);
}

const secretsOf = (c: OAuthConnection | undefined): string[] =>
  [c?.tokens?.access_token, c?.tokens?.refresh_token, c?.client?.client_secret].filter(
    (v): v is string => typeof v === 'string' && v !== '',
  );

/**
 * Starts a sign-in for the source and returns the URL to open in a browser. The state in it is
 * bound to this organization and source, works once and expires (OAUTH_STATE_TTL_MS).
 */
export async function startOAuthConnect(deps: OAuthDeps, source: SourceRow): Promise<{ url: string }> {
  const { organization_id: organizationId, id: sourceId } = source;
  const serverUrl = serverUrlOf(source);
  if (!serverUrl)
    throw errors.validation('The source has no URL to sign in to', [
      { path: '/params/sourceId', message: 'has no url (mcp) or baseUrl (api)' },
    ]);
  const stored = await findSourceOAuth(deps.db, organizationId, sourceId);
  let previous: OAuthConnection | undefined;
  try {
    previous = stored ? openConnection<OAuthConnection>(deps, stored) : undefined;
  } catch {
    previous = undefined;
  }
  // A client registered for this very server is registered again only if the server asks.
  const connection: OAuthConnection = {
    serverUrl,
    ...(previous?.serverUrl === serverUrl && previous.client && { client: previous.client }),
  };
  const options = clientOptions(deps, source, connection);
  if (typeof options === 'string')
    throw errors.validation(`Source "${source.name}" cannot sign in: ${options}`, [
      { path: '/params/sourceId', message: options },
    ]);
  const state = newState();
  let begun: Awaited<ReturnType<typeof beginAuthorization>>;
  try {
    begun = await beginAuthorization(options, state);
  } catch (err) {
    throw errors.upstream(
      `Source "${source.name}": the sign-in could not start: ${failureText(err, secretsOf(connection))}`,
    );
  }
  // The URL goes to a browser (a redirect of the dashboard): only a web page will do.
  const { protocol } = begun.authorizationUrl;
  if (protocol !== 'https:' && protocol !== 'http:')
    throw errors.upstream(
      `Source "${source.name}": the authorization server named a ${protocol} URL to sign in at`,
    );
  const pending: PendingSignIn = { codeVerifier: begun.codeVerifier, connection: begun.connection };
  await savePendingSignIn(deps, organizationId, sourceId, state, pending);
  return { url: begun.authorizationUrl.toString() };
}

export type CallbackOutcome =
  | { ok: true; organizationId: string; sourceId: string; sourceName: string }
  | { ok: false; message: string; sourceId?: string };

/** Completes a sign-in from the callback's query: the state's pending sign-in, then the code exchange. */
export async function finishSourceConnect(
  deps: OAuthDeps,
  query: { state?: string; code?: string; error?: string; error_description?: string },
): Promise<CallbackOutcome> {
  const taken = await takePendingSignIn<PendingSignIn>(deps, query.state ?? '');
  if (!taken.ok)
    return {
      ok: false,
      message:
        taken.reason === 'expired'
          ? 'This sign-in took too long and has expired. Start it again from the source page.'
          : 'This sign-in is not known (already used, replaced by a newer one, or never started here). Start it again from the source page.',
    };
  const { organizationId, sourceId, pending } = taken;
  const source = await findSource(deps.db, organizationId, sourceId);
  if (!source) return { ok: false, message: 'The source of this sign-in no longer exists.' };
  if (query.error !== undefined)
    return {
      ok: false,
      sourceId,
      message: `The provider did not grant access to "${source.name}": ${query.error.slice(0, 100)}${query.error_description ? ` (${query.error_description.slice(0, 300)})` : ''}.`,
    };
  const code = query.code ?? '';
  if (code === '' || code.length > 4096)
    return { ok: false, sourceId, message: 'The provider sent no authorization code.' };
  // The source's URL or auth may have changed since the sign-in started: the tokens are for
  // the server the sign-in was for, so a changed source must sign in again.
  if (serverUrlOf(source) !== pending.connection.serverUrl)
    return {
      ok: false,
      sourceId,
      message: `The URL of "${source.name}" changed during the sign-in. Start it again.`,
    };
  const options = clientOptions(deps, source, pending.connection);
  if (typeof options === 'string')
    return { ok: false, sourceId, message: `"${source.name}" cannot sign in: ${options}.` };
  let connection: OAuthConnection;
  try {
    connection = await completeAuthorization(options, code, pending.codeVerifier);
  } catch (err) {
    return {
      ok: false,
      sourceId,
      message: `The provider refused the sign-in of "${source.name}": ${failureText(err, [code, pending.codeVerifier, ...secretsOf(pending.connection)])}`,
    };
  }
  await saveConnectedSourceOAuth(deps.db, {
    organizationId,
    sourceId,
    sealed: sealConnection(deps, organizationId, sourceId, connection),
    accessExpiresAt: accessExpiresAt(connection),
    now: deps.clock.now(),
  });
  deps.log.info({ organizationId, sourceId }, 'source signed in with OAuth');
  return { ok: true, organizationId, sourceId, sourceName: source.name };
}

export type AccessToken =
  | { ok: true; token: string; refresh(): Promise<AccessToken> }
  | { ok: false; errorType: 'not_configured' | 'auth_failed' | 'unreachable'; message: string };

const reconnect = (source: SourceLike) =>
  `reconnect it (Connect on the source's dashboard page, or POST /api/svc/sources/${source.id}/connect)`;

/**
 * A working access token of an oauth source for a run (`taskId` names the task to tell if the
 * sign-in has run out). `refresh` gets a new one (after a 401). Undefined when the source has
 * no sign-in stored and keeps a token of its own in authConfig (a token obtained elsewhere).
 */
export async function oauthAccessToken(
  deps: OAuthDeps,
  source: SourceLike,
  o: { taskId?: string; hasOwnToken: boolean },
): Promise<AccessToken | undefined> {
  const row = await findSourceOAuth(deps.db, source.organization_id, source.id);
  if (!row) {
    if (o.hasOwnToken) return undefined;
    return {
      ok: false,
      errorType: 'not_configured',
      message: `source "${source.name}" has never been connected: ${reconnect(source).replace('reconnect', 'connect')}`,
    };
  }
  return tokenOf(deps, source, row, o.taskId);
}

/**
 * The sign-in's access token, refreshed when near its end, or when it is `past`: a token a
 * server refused, which only a token other than it can follow.
 */
async function tokenOf(
  deps: OAuthDeps,
  source: SourceLike,
  row: SourceOAuthRow,
  taskId: string | undefined,
  past?: string,
): Promise<AccessToken> {
  const expired = (why: string): AccessToken => ({
    ok: false,
    errorType: 'auth_failed',
    message: `source "${source.name}": the OAuth sign-in has run out (${why}); ${reconnect(source)}`,
  });
  if (row.status === 'expired') return expired(row.failure ?? 'the refresh failed');
  let connection: OAuthConnection;
  try {
    connection = openConnection<OAuthConnection>(deps, row);
  } catch {
    return {
      ok: false,
      errorType: 'not_configured',
      message: `the stored OAuth sign-in of source "${source.name}" cannot be decrypted (was SVC_SECRET_KEY changed?); ${reconnect(source)}`,
    };
  }
  if (connection.serverUrl !== serverUrlOf(source))
    return {
      ok: false,
      errorType: 'not_configured',
      message: `source "${source.name}": its URL changed since it was connected; ${reconnect(source)}`,
    };
  const token = connection.tokens?.access_token;
  const endsAt = row.access_expires_at?.getTime();
  const fresh = endsAt === undefined || endsAt - REFRESH_MARGIN_MS > deps.clock.now().getTime();
  const ready = (t: string): AccessToken => ({
    ok: true,
    token: t,
    // Past this token: a newer one someone else got meanwhile, or a refresh of the latest.
    refresh: async () => {
      const latest = await findSourceOAuth(deps.db, source.organization_id, source.id);
      if (!latest) return expired('the sign-in was removed');
      return tokenOf(deps, source, latest, taskId, t);
    },
  });
  if (token && fresh && token !== past) return ready(token);

  const options = clientOptions(deps, source, connection);
  if (typeof options === 'string')
    return { ok: false, errorType: 'not_configured', message: `source "${source.name}": ${options}` };
  // Another process may be refreshing it right now: a second use of a rotated refresh token
  // would be refused, so this one waits for that refresh and takes its token.
  const now = deps.clock.now();
  const claimed = await claimSourceOAuthRefresh(deps.db, {
    sourceId: source.id,
    version: row.version,
    now,
    until: new Date(now.getTime() + REFRESH_LEASE_MS),
  });
  if (!claimed) return afterOtherRefresh(deps, source, row, taskId, past);
  const failure = async (err: unknown): Promise<AccessToken> => {
    const why = failureText(err, secretsOf(connection));
    // The provider's own refusal (invalid_grant: revoked or expired; invalid_client...) ends the
    // sign-in; a server error, a time-out or no answer does not: the next run tries again.
    const refused =
      (err instanceof OAuthError && !(err instanceof ServerError)) || !connection.tokens?.refresh_token;
    const at = { organizationId: source.organization_id, sourceId: source.id, reason: why };
    if (!refused) {
      await releaseSourceOAuthRefresh(deps.db, source.id, row.version);
      deps.log.warn(at, 'OAuth refresh of a source failed for want of an answer; the next run tries again');
      return {
        ok: false,
        errorType: 'unreachable',
        message: `source "${source.name}": the OAuth token could not be refreshed (${why}); the next run tries again`,
      };
    }
    const changed = await expireConnection(deps, {
      sourceId: source.id,
      sourceName: source.name,
      version: row.version,
      failure: `the provider refused to refresh the sign-in (${why})`,
      ...(taskId !== undefined && { taskId }),
    });
    if (changed) deps.log.warn(at, 'OAuth sign-in of a source expired: the provider refused the refresh');
    if (!changed) {
      // Another process changed the connection meanwhile (refreshed it, or expired it first).
      const latest = await findSourceOAuth(deps.db, source.organization_id, source.id);
      if (latest && latest.version !== row.version) return tokenOf(deps, source, latest, taskId, past);
    }
    return expired(`the provider refused to refresh it: ${why}`);
  };
  let refreshed: OAuthConnection;
  try {
    refreshed = await refreshConnection(options);
  } catch (err) {
    return failure(err);
  }
  const access = refreshed.tokens?.access_token;
  if (!access) return failure(new Error('the refresh gave no access token'));
  const saved = await saveRefreshedSourceOAuth(deps.db, {
    sourceId: source.id,
    version: row.version,
    sealed: sealConnection(deps, source.organization_id, source.id, refreshed),
    accessExpiresAt: accessExpiresAt(refreshed),
    now: deps.clock.now(),
  });
  if (!saved) {
    const latest = await findSourceOAuth(deps.db, source.organization_id, source.id);
    if (latest) return tokenOf(deps, source, latest, taskId, past);
  }
  return ready(access);
}

/** Waits for the refresh another process holds the lease of, then uses what it left. */
async function afterOtherRefresh(
  deps: OAuthDeps,
  source: SourceLike,
  row: SourceOAuthRow,
  taskId: string | undefined,
  past: string | undefined,
): Promise<AccessToken> {
  const deadline = Date.now() + REFRESH_LEASE_MS + 5_000;
  while (Date.now() < deadline) {
    await sleep(REFRESH_POLL_MS);
    const latest = await findSourceOAuth(deps.db, source.organization_id, source.id);
    if (!latest) break;
    if (latest.version !== row.version || latest.status !== row.status)
      return tokenOf(deps, source, latest, taskId, past);
    // The other process gave up (or died): this one may try.
    const lease = latest.refresh_lease_until?.getTime();
    if (lease === undefined || lease <= deps.clock.now().getTime())
      return tokenOf(deps, source, latest, taskId, past);
  }
  return {
    ok: false,
    errorType: 'unreachable',
    message: `source "${source.name}": another refresh of its OAuth sign-in did not finish in time; the next run tries again`,
  };
}
