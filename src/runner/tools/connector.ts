// Connects a source with `authType: connector`: its tools come from the connector provider
// (domain/connector), for the source's own account there. The account must be connected (the
// person signed in through POST /sources/{id}/connect); each tool call goes to the provider,
// which makes it with the account's credentials. The service never holds those credentials.

import { connectorProvider, connectorSubject } from '../../domain/connector/provider.ts';
import { ConnectorError, NOT_CONFIGURED_MESSAGE } from '../../domain/connector/types.ts';
import { connectorToolkitOf, NO_TOOLKIT_MESSAGE } from '../../domain/connectors.ts';
import { MAX_TOOLS_PER_SOURCE } from './tool-bounds.ts';
import {
  type ConnectErrorType,
  type ConnectOptions,
  type ConnectResult,
  capText,
  type SourceToConnect,
  type ToolCallOutcome,
} from './types.ts';

const KIND_TO_ERROR: Record<ConnectorError['kind'], ConnectErrorType> = {
  not_configured: 'not_configured',
  refused: 'refused',
  unreachable: 'unreachable',
  timeout: 'timeout',
  protocol_error: 'protocol_error',
};

export async function connectConnectorSource(
  source: SourceToConnect,
  options: ConnectOptions,
): Promise<ConnectResult> {
  const fail = (errorType: ConnectErrorType, detail: string): ConnectResult => ({
    ok: false,
    errorType,
    message: capText(`source "${source.name}": ${detail}`, 1000),
  });
  const provider = connectorProvider(options.config);
  if (!provider) return fail('not_configured', NOT_CONFIGURED_MESSAGE);
  const toolkit = connectorToolkitOf({ auth_config: source.authConfig });
  if (!toolkit) return fail('not_configured', NO_TOOLKIT_MESSAGE);
  if (!source.organizationId) return fail('not_configured', 'the source has no organization');
  const subject = connectorSubject(source.organizationId, source.id, toolkit);
  try {
    const account = await provider.account(subject, options.signal);
    await options.connectorAccount?.(account, subject);
    if (!account?.connected) {
      const state = account ? `its ${provider.name} account is ${account.status}` : 'it was never connected';
      return fail(
        'not_configured',
        `not connected to the connector provider (${state}); connect it with the Connect button of its dashboard page or POST /api/svc/sources/${source.id}/connect`,
      );
    }
    const set = await provider.openTools(subject, account, {
      maxTools: MAX_TOOLS_PER_SOURCE,
      signal: options.signal,
    });
    return {
      ok: true,
      connection: {
        tools: set.tools,
        async call(name, args, signal): Promise<ToolCallOutcome> {
          try {
            const outcome = await set.call(name, args, signal);
            return outcome.ok
              ? { ok: true, text: capText(outcome.text) }
              : { ok: false, message: capText(outcome.message) };
          } catch (err) {
            if (!(err instanceof ConnectorError)) throw err;
            return { ok: false, message: capText(`tool ${name} failed: ${err.message}`) };
          }
        },
        // Nothing is held open: each call is a request of its own.
        close: async () => {},
      },
    };
  } catch (err) {
    if (err instanceof ConnectorError) return fail(KIND_TO_ERROR[err.kind], err.message);
    throw err;
  }
}
