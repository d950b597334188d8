// SVC_OAUTH_CLIENTS: the OAuth clients the operator registered with providers, by the name a
// source's authConfig.provider gives. config.ts parses it once at boot.

export interface OAuthClientCredentials {
  clientId: string;
  clientSecret?: string;
}

const PROVIDER = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/**
 * `provider=clientId` or `provider=clientId:clientSecret`, comma separated (the client id ends
 * at the first colon). Returns a problem text (naming no secret) when malformed.
 */
export function parseOAuthClients(raw: string): Map<string, OAuthClientCredentials> | string {
  const clients = new Map<string, OAuthClientCredentials>();
  for (const [i, entry] of raw.split(',').entries()) {
    const part = entry.trim();
    if (part === '') continue;
    const eq = part.indexOf('=');
    const provider = eq < 0 ? part : part.slice(0, eq).trim();
    if (eq < 0 || !PROVIDER.test(provider))
      return `entry ${i + 1} must be provider=clientId or provider=clientId:clientSecret (provider: letters, digits, . _ -)`;
    if (clients.has(provider)) return `names the provider "${provider}" twice`;
    const value = part.slice(eq + 1);
    const colon = value.indexOf(':');
    const clientId = (colon < 0 ? value : value.slice(0, colon)).trim();
    const clientSecret = colon < 0 ? undefined : value.slice(colon + 1).trim();
    if (clientId === '') return `the provider "${provider}" has an empty client id`;
    clients.set(provider, clientSecret ? { clientId, clientSecret } : { clientId });
  }
  return clients;
}
