// How a source's authType and authConfig become request headers or query parameters, for
// http and websocket MCP sources and api sources alike. The stored credentials (token,
// username, password, apiKey) arrive decrypted in `secrets.credentials`.
import type { SourceToConnect } from './types.ts';

export type AppliedAuth =
  | { ok: true; headers: Record<string, string>; query: Record<string, string> }
  | { ok: false; errorType: 'not_configured'; message: string };

/** The header a plain `api_key` or `header` source sends when authConfig.headerName is unset. */
export const DEFAULT_KEY_HEADER = 'X-API-Key';
/** The query parameter of a `query` source when authConfig.headerName is unset. */
export const DEFAULT_QUERY_PARAM = 'api_key';

const withPrefix = (prefix: string | undefined, value: string) =>
  prefix === undefined || prefix === '' ? value : `${prefix.trimEnd()} ${value}`;

const missing = (authType: string, what: string): AppliedAuth => ({
  ok: false,
  errorType: 'not_configured',
  message: `authType ${authType} needs ${what} in authConfig; set it with a PATCH of the source`,
});

/**
 * - none (or unset): nothing;
 * - bearer, oauth: `Authorization: <prefix, default Bearer> <token>` (oauth sends a token
 *   obtained elsewhere: this version runs no OAuth flow itself);
 * - header, api_key: `<headerName, default X-API-Key>: <prefix> <token or apiKey>`;
 * - basic: `Authorization: Basic base64(username:password)`;
 * - query: `?<headerName, default api_key>=<apiKey or token>`;
 * - connector: refused until a connector provider is configured.
 */
export function applySourceAuth(
  source: Pick<SourceToConnect, 'authType' | 'authConfig' | 'secrets'>,
): AppliedAuth {
  const authType = source.authType ?? 'none';
  const config = source.authConfig ?? {};
  const { token, apiKey, username, password } = source.secrets.credentials;
  const ok = (headers: Record<string, string>, query: Record<string, string> = {}): AppliedAuth => ({
    ok: true,
    headers,
    query,
  });
  switch (authType) {
    case 'none':
      return ok({});
    case 'bearer':
    case 'oauth':
      if (!token) return missing(authType, 'token');
      return ok({ [config.headerName ?? 'Authorization']: withPrefix(config.prefix ?? 'Bearer', token) });
    case 'header':
    case 'api_key': {
      const secret = authType === 'api_key' ? (apiKey ?? token) : (token ?? apiKey);
      if (!secret) return missing(authType, authType === 'api_key' ? 'apiKey' : 'token (or apiKey)');
      return ok({ [config.headerName ?? DEFAULT_KEY_HEADER]: withPrefix(config.prefix, secret) });
    }
    case 'basic':
      if (username === undefined || password === undefined) return missing(authType, 'username and password');
      return ok({ Authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` });
    case 'query': {
      const secret = apiKey ?? token;
      if (!secret) return missing(authType, 'apiKey (or token)');
      return ok({}, { [config.headerName ?? DEFAULT_QUERY_PARAM]: secret });
    }
    case 'connector':
      return {
        ok: false,
        errorType: 'not_configured',
        message:
          'connector provider not configured: this service has no connector provider set up, so connector sources cannot connect',
      };
    default:
      return { ok: false, errorType: 'not_configured', message: `authType ${authType} is not known` };
  }
}

/** The URL with the auth's query parameters added (existing parameters of the same name replaced). */
export function withAuthQuery(url: URL, query: Record<string, string>): URL {
  const out = new URL(url);
  for (const [name, value] of Object.entries(query)) out.searchParams.set(name, value);
  return out;
}
