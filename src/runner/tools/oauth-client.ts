// The OAuth client of sources with authType `oauth`, on the official MCP SDK's client-side
// auth: discovery (protected-resource and authorization-server metadata), dynamic client
// registration or an operator's client, the authorization-code flow with PKCE, and refresh.
// Nothing here touches the database: a connection is a plain record that the caller seals
// and stores (domain/source-oauth.ts), and every request goes through the fetch it is given
// (the SSRF guard, a size bound and a time limit: oauthFetch).
import {
  auth,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  refreshAuthorization,
  selectResourceURL,
} from '@modelcontextprotocol/sdk/client/auth.js';
import type {
  AuthorizationServerMetadata,
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { FetchLike } from '../../lib/outbound.ts';
import { capResponse } from '../capped-response.ts';

/** What a sign-in leaves: sealed at rest as one value. */
export interface OAuthConnection {
  /** The MCP server URL or api base URL the sign-in was for: tokens go nowhere else. */
  serverUrl: string;
  /** The client registered dynamically (with its secret, if the server gave one). */
  client?: OAuthClientInformationMixed;
  discovery?: OAuthDiscoveryState;
  tokens?: OAuthTokens;
  /** When the tokens were obtained (ms since the epoch): expires_in counts from here. */
  obtainedAt?: number;
}

/** An operator-registered client of a provider (SVC_OAUTH_CLIENTS). */
export interface OperatorClient {
  clientId: string;
  clientSecret?: string;
}

/** For api sources: the provider's endpoints and scopes, named by authConfig (no discovery). */
export interface ApiEndpoints {
  authorizationUrl: string;
  tokenUrl: string;
  scope?: string;
}

export interface OAuthClientOptions {
  connection: OAuthConnection;
  redirectUrl: string;
  operatorClient?: OperatorClient;
  /** Set for api sources; MCP sources discover their authorization server. */
  api?: ApiEndpoints;
  scope?: string;
  fetch: FetchLike;
}

/** Bytes of one metadata, registration or token answer. */
export const MAX_OAUTH_RESPONSE_BYTES = 64 * 1024;
/** One request to an authorization server gives up after this long. */
const OAUTH_REQUEST_TIMEOUT_MS = 15_000;

/** The guarded fetch with a size bound on every answer and a time limit on every request. */
export function oauthFetch(fetch: FetchLike): FetchLike {
  return async (input, init = {}) => {
    const signal = init.signal ?? AbortSignal.timeout(OAUTH_REQUEST_TIMEOUT_MS);
    return capResponse(await fetch(input, { ...init, signal }), MAX_OAUTH_RESPONSE_BYTES);
  };
}

/** The authorization-server metadata an api source's authConfig amounts to. */
function apiDiscovery(api: ApiEndpoints): OAuthDiscoveryState {
  const metadata: AuthorizationServerMetadata = {
    issuer: new URL(api.authorizationUrl).origin,
    authorization_endpoint: api.authorizationUrl,
    token_endpoint: api.tokenUrl,
    response_types_supported: ['code'],
    code_challenge_methods_supported: ['S256'],
    // The client's secret goes in the form body: the one way every provider takes.
    token_endpoint_auth_methods_supported: ['client_secret_post', 'none'],
  };
  return { authorizationServerUrl: metadata.issuer, authorizationServerMetadata: metadata };
}

/** The SDK's view of one connection: reads and writes the record in memory. */
class ConnectionProvider implements OAuthClientProvider {
  readonly record: OAuthConnection;
  readonly #o: OAuthClientOptions;
  readonly #state: string | undefined;
  #verifier: string | undefined;
  authorizationUrl: URL | undefined;
  validateResourceURL?: () => Promise<URL | undefined>;

  constructor(o: OAuthClientOptions, state?: string, verifier?: string) {
    this.#o = o;
    this.record = { ...o.connection };
    this.#state = state;
    this.#verifier = verifier;
    // An api's token is for the api: no resource indicator is sent (many providers refuse one).
    if (o.api) this.validateResourceURL = async () => undefined;
  }
  get redirectUrl(): string {
    return this.#o.redirectUrl;
  }
  get clientMetadata(): OAuthClientMetadata {
    const scope = this.#o.scope ?? this.#o.api?.scope;
    return {
      client_name: 'Scheduled tasks',
      redirect_uris: [this.#o.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      ...(scope && { scope }),
    };
  }
  state(): string {
    return this.#state ?? '';
  }
  clientInformation(): OAuthClientInformationMixed | undefined {
    const operator = this.#o.operatorClient;
    if (operator) {
      return {
        client_id: operator.clientId,
        ...(operator.clientSecret !== undefined && { client_secret: operator.clientSecret }),
      };
    }
    return this.record.client;
  }
  saveClientInformation(client: OAuthClientInformationMixed): void {
    // The operator's client stays in the configuration, not in each source's record.
    if (!this.#o.operatorClient) this.record.client = client;
  }
  tokens(): OAuthTokens | undefined {
    return this.record.tokens;
  }
  saveTokens(tokens: OAuthTokens): void {
    this.record.tokens = tokens;
    this.record.obtainedAt = Date.now();
  }
  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string): void {
    this.#verifier = verifier;
  }
  codeVerifier(): string {
    if (this.#verifier === undefined) throw new Error('no PKCE code verifier for this sign-in');
    return this.#verifier;
  }
  get verifier(): string | undefined {
    return this.#verifier;
  }
  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    if (scope === 'all' || scope === 'client') delete this.record.client;
    if (scope === 'all' || scope === 'tokens') delete this.record.tokens;
    if (scope === 'discovery') delete this.record.discovery;
  }
  saveDiscoveryState(state: OAuthDiscoveryState): void {
    if (!this.#o.api) this.record.discovery = state;
  }
  discoveryState(): OAuthDiscoveryState | undefined {
    return this.#o.api ? apiDiscovery(this.#o.api) : this.record.discovery;
  }
}

/**
 * Starts a sign-in: discovers the authorization server (MCP) or takes authConfig's endpoints
 * (api), registers a client if there is none, and builds the authorization URL with PKCE and
 * `state`. Returns the URL to open and what the callback needs (the verifier, and the
 * connection so far: client and metadata, no tokens).
 */
export async function beginAuthorization(
  o: OAuthClientOptions,
  state: string,
): Promise<{ authorizationUrl: URL; codeVerifier: string; connection: OAuthConnection }> {
  // A new sign-in never refreshes what an older one left: no tokens go in.
  const { tokens: _tokens, obtainedAt: _at, discovery: _discovery, ...kept } = o.connection;
  const provider = new ConnectionProvider({ ...o, connection: kept }, state);
  const result = await auth(provider, { serverUrl: o.connection.serverUrl, fetchFn: o.fetch });
  const url = provider.authorizationUrl;
  const verifier = provider.verifier;
  if (result !== 'REDIRECT' || !url || verifier === undefined)
    throw new Error('the authorization server did not start a sign-in');
  return { authorizationUrl: url, codeVerifier: verifier, connection: provider.record };
}

/** Exchanges the callback's code (with the PKCE verifier) for tokens. */
export async function completeAuthorization(
  o: OAuthClientOptions,
  code: string,
  codeVerifier: string,
): Promise<OAuthConnection> {
  const provider = new ConnectionProvider(o, undefined, codeVerifier);
  await auth(provider, {
    serverUrl: o.connection.serverUrl,
    authorizationCode: code,
    fetchFn: o.fetch,
  });
  if (!provider.record.tokens) throw new Error('the authorization server gave no tokens');
  return provider.record;
}

/** When the access token stops working, if the server said. */
export function accessExpiresAt(connection: OAuthConnection): Date | null {
  const seconds = connection.tokens?.expires_in;
  if (seconds === undefined || connection.obtainedAt === undefined) return null;
  return new Date(connection.obtainedAt + seconds * 1000);
}

/**
 * Refreshes the tokens with the stored refresh token, against the metadata found at sign-in.
 * Throws what the SDK throws: an OAuthError from the server (invalid_grant for a revoked or
 * expired refresh token), or a network or size failure.
 */
export async function refreshConnection(o: OAuthClientOptions): Promise<OAuthConnection> {
  const provider = new ConnectionProvider(o);
  const record = provider.record;
  const refreshToken = record.tokens?.refresh_token;
  if (!refreshToken) throw new Error('no refresh token was issued');
  const discovery = provider.discoveryState();
  const client = provider.clientInformation();
  if (!discovery || !client) throw new Error('the sign-in left no authorization server or client');
  const selected = await selectResourceURL(record.serverUrl, provider, discovery.resourceMetadata);
  const resource =
    selected && discovery.resourceMetadata && !provider.validateResourceURL
      ? discovery.resourceMetadata.resource
      : selected;
  const tokens = await refreshAuthorization(discovery.authorizationServerUrl, {
    ...(discovery.authorizationServerMetadata && { metadata: discovery.authorizationServerMetadata }),
    clientInformation: client,
    refreshToken,
    ...(resource !== undefined && { resource }),
    fetchFn: o.fetch,
  });
  provider.saveTokens({ ...tokens, ...(record.tokens?.issuer && { issuer: record.tokens.issuer }) });
  return provider.record;
}
