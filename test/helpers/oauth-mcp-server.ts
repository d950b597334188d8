// An OAuth authorization server and an MCP server that requires its tokens, both on one
// 127.0.0.1 port, built with the official SDK's server-side auth (mcpAuthRouter: metadata,
// dynamic client registration, authorize, token, revoke; requireBearerAuth on /mcp). The
// provider behind them is in memory and lets a test expire access tokens and revoke refresh
// tokens. The authorize step approves at once (no consent page) and redirects with the code.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import { InvalidGrantError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import type {
  AuthorizationParams,
  OAuthServerProvider,
} from '@modelcontextprotocol/sdk/server/auth/provider.js';
import {
  getOAuthProtectedResourceMetadataUrl,
  mcpAuthRouter,
} from '@modelcontextprotocol/sdk/server/auth/router.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { OAuthClientInformationFull, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';

// express is the SDK's auth router's own framework; it ships no types in this tree.
const require = createRequire(import.meta.url);
const express = require('express') as any;

interface Issued {
  clientId: string;
  expiresAt: number;
  resource?: string;
}

export interface OAuthMcpServer {
  /** The MCP endpoint (a source's config.url). */
  mcpUrl: string;
  /** The authorization server's base URL (its metadata, authorize and token endpoints). */
  issuer: string;
  /** Every secret of the sign-ins (tokens, client secrets, codes, PKCE verifiers): none may leak. */
  secrets(): string[];
  /** Access tokens issued from now on live this many seconds. */
  accessTtlSeconds: number;
  /** Every access token issued so far stops working now. */
  expireAccessTokens(): void;
  /** Every refresh token issued so far stops working now. */
  revokeRefreshTokens(): void;
  /** While true, the token endpoint answers 503 server_error (an outage, not a refusal). */
  tokenOutage: boolean;
  /** Called by the `whoami` tool (and GET /api/whoami) as it answers: a test expires or revokes tokens mid-run with it. */
  onToolCall: (() => void) | undefined;
  /** The bearer tokens /mcp and /api/whoami accepted, in order. */
  accepted: string[];
  counts: {
    registrations: number;
    authorizations: number;
    codeExchanges: number;
    refreshes: number;
    refusedRefreshes: number;
  };
  /** A client registered by the operator (SVC_OAUTH_CLIENTS), accepted without registration. */
  addClient(client: { clientId: string; clientSecret: string; redirectUri: string }): void;
  close(): Promise<void>;
}

export async function startOAuthMcpServer(): Promise<OAuthMcpServer> {
  const clients = new Map<string, OAuthClientInformationFull>();
  const codes = new Map<
    string,
    { clientId: string; challenge: string; redirectUri: string; resource?: string }
  >();
  const access = new Map<string, Issued>();
  const refresh = new Map<string, Issued>();
  const handedOut: string[] = [];
  const counts = { registrations: 0, authorizations: 0, codeExchanges: 0, refreshes: 0, refusedRefreshes: 0 };
  const state: { accessTtlSeconds: number; tokenOutage: boolean; onToolCall: (() => void) | undefined } = {
    accessTtlSeconds: 3600,
    tokenOutage: false,
    onToolCall: undefined,
  };
  const secret = (prefix: string) => {
    // A canary: `canary-<what>-<32 hex>`, whose pieces a leak test can look for.
    const value = `canary-${prefix}-${randomBytes(16).toString('hex')}`;
    handedOut.push(value);
    return value;
  };

  const clientsStore: OAuthRegisteredClientsStore = {
    getClient: (id) => clients.get(id),
    registerClient: (client) => {
      counts.registrations++;
      const full = {
        ...client,
        client_id: randomUUID(),
        client_id_issued_at: Math.floor(Date.now() / 1000),
      } as OAuthClientInformationFull;
      if (full.client_secret) handedOut.push(full.client_secret);
      clients.set(full.client_id, full);
      return full;
    },
  };

  const tokensFor = (clientId: string, resource: string | undefined): OAuthTokens => {
    const now = Date.now() / 1000;
    const accessToken = secret('at');
    const refreshToken = secret('rt');
    access.set(accessToken, {
      clientId,
      expiresAt: now + state.accessTtlSeconds,
      ...(resource && { resource }),
    });
    refresh.set(refreshToken, { clientId, expiresAt: now + 30 * 86400, ...(resource && { resource }) });
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: state.accessTtlSeconds,
      refresh_token: refreshToken,
      scope: 'tools',
    };
  };

  const provider: OAuthServerProvider = {
    get clientsStore() {
      return clientsStore;
    },
    async authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res) {
      counts.authorizations++;
      const code = secret('code');
      codes.set(code, {
        clientId: client.client_id,
        challenge: params.codeChallenge,
        redirectUri: params.redirectUri,
        ...(params.resource && { resource: params.resource.href }),
      });
      const target = new URL(params.redirectUri);
      target.searchParams.set('code', code);
      if (params.state !== undefined) target.searchParams.set('state', params.state);
      res.redirect(302, target.href);
    },
    async challengeForAuthorizationCode(_client, code) {
      const found = codes.get(code);
      if (!found) throw new InvalidGrantError('unknown authorization code');
      return found.challenge;
    },
    async exchangeAuthorizationCode(client, code, _verifier, redirectUri) {
      const found = codes.get(code);
      if (!found || found.clientId !== client.client_id)
        throw new InvalidGrantError('unknown authorization code');
      if (redirectUri !== undefined && redirectUri !== found.redirectUri)
        throw new InvalidGrantError('redirect_uri does not match');
      codes.delete(code);
      counts.codeExchanges++;
      return tokensFor(client.client_id, found.resource);
    },
    async exchangeRefreshToken(client, refreshToken) {
      const found = refresh.get(refreshToken);
      if (!found || found.clientId !== client.client_id || found.expiresAt < Date.now() / 1000) {
        counts.refusedRefreshes++;
        throw new InvalidGrantError('refresh token revoked or unknown');
      }
      // Rotation: the refresh token used is spent.
      refresh.delete(refreshToken);
      counts.refreshes++;
      return tokensFor(client.client_id, found.resource);
    },
    async verifyAccessToken(token): Promise<AuthInfo> {
      const found = access.get(token);
      if (!found) throw new InvalidTokenError('unknown token');
      return {
        token,
        clientId: found.clientId,
        scopes: ['tools'],
        expiresAt: found.expiresAt,
        ...(found.resource && { resource: new URL(found.resource) }),
      };
    },
  };

  const app = express();
  const server: Server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const mcpUrl = `${base}/mcp`;
  const noLimit = { rateLimit: false as const };
  // The PKCE verifiers the service sent are secrets of the sign-in too: kept for leak tests.
  app.use('/token', express.urlencoded({ extended: false }), (req: any, res: any, next: () => void) => {
    if (typeof req.body?.code_verifier === 'string') handedOut.push(req.body.code_verifier);
    if (state.tokenOutage)
      return res.status(503).json({ error: 'server_error', error_description: 'down for maintenance' });
    next();
  });
  app.use(
    mcpAuthRouter({
      provider,
      issuerUrl: new URL(base),
      resourceServerUrl: new URL(mcpUrl),
      scopesSupported: ['tools'],
      authorizationOptions: noLimit,
      tokenOptions: noLimit,
      clientRegistrationOptions: noLimit,
      revocationOptions: noLimit,
    }),
  );
  const accepted: string[] = [];
  app.post(
    '/mcp',
    express.json(),
    requireBearerAuth({
      verifier: provider,
      resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(new URL(mcpUrl)),
    }),
    async (req: any, res: any) => {
      accepted.push(req.auth.token);
      const mcp = new McpServer({ name: 'signed-in', version: '1.0.0' });
      mcp.registerTool('whoami', { description: 'Says who signed in' }, async () => {
        state.onToolCall?.();
        return { content: [{ type: 'text', text: `signed in as client ${req.auth.clientId.slice(0, 8)}` }] };
      });
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res, req.body);
    },
  );
  app.all('/mcp', (_req: any, res: any) => res.status(405).set('allow', 'POST').end());
  // A plain API behind the same tokens (an api source's base URL is `${issuer}/api`).
  app.get('/api/whoami', requireBearerAuth({ verifier: provider }), (req: any, res: any) => {
    accepted.push(req.auth.token);
    state.onToolCall?.();
    res.json({ signedInAs: `client ${req.auth.clientId.slice(0, 8)}` });
  });

  return {
    mcpUrl,
    issuer: base,
    secrets: () => [...handedOut],
    get accessTtlSeconds() {
      return state.accessTtlSeconds;
    },
    set accessTtlSeconds(v: number) {
      state.accessTtlSeconds = v;
    },
    get tokenOutage() {
      return state.tokenOutage;
    },
    set tokenOutage(v: boolean) {
      state.tokenOutage = v;
    },
    get onToolCall() {
      return state.onToolCall;
    },
    set onToolCall(f: (() => void) | undefined) {
      state.onToolCall = f;
    },
    expireAccessTokens() {
      for (const t of access.values()) t.expiresAt = Date.now() / 1000 - 1;
    },
    revokeRefreshTokens() {
      refresh.clear();
    },
    accepted,
    counts,
    addClient({ clientId, clientSecret, redirectUri }) {
      handedOut.push(clientSecret);
      clients.set(clientId, {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [redirectUri],
        token_endpoint_auth_method: 'client_secret_post',
      } as OAuthClientInformationFull);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
