// Which connector provider this service uses: SVC_CONNECTOR_PROVIDER picks the implementation
// of the seam (types.ts); without it every connector source answers NOT_CONFIGURED_MESSAGE.
import type { Config } from '../../config.ts';
import { outboundFetch } from '../../lib/outbound.ts';
import { ComposioProvider } from './composio.ts';
import type { ConnectorProvider, ConnectorSubject } from './types.ts';

/** One provider per configuration object (the service's Config: one for the process). */
const providers = new WeakMap<object, ConnectorProvider>();

/** The configured provider (one per Config), or undefined when SVC_CONNECTOR_PROVIDER is unset. */
export function connectorProvider(
  config: Partial<Pick<Config, 'connector'>> & Pick<Config, 'allowPrivateUrls'>,
): ConnectorProvider | undefined {
  const settings = config.connector;
  if (!settings) return undefined;
  const known = providers.get(config);
  if (known) return known;
  // settings.provider is `composio`, the one implementation; another would be chosen here.
  const provider = new ComposioProvider({
    apiBase: settings.apiBase,
    apiKey: settings.apiKey,
    // The operator's base URL passes the private-address guard like every outbound call.
    fetch: outboundFetch(config),
  });
  providers.set(config, provider);
  return provider;
}

/** The provider's user id of a source: its organization and its own id, so no two sources share one. */
export function connectorSubject(
  organizationId: string,
  sourceId: string,
  toolkit: string,
): ConnectorSubject {
  return { userId: `svc:${organizationId}:${sourceId}`, toolkit: toolkit.trim().toLowerCase() };
}
