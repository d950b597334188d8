// The connector provider seam. A source with `authType: connector` gets its tools from a
// third-party connector provider, which holds the sign-in to the tool's service (the OAuth of
// GitHub, Gmail, ...) in a connected account of its own. ConnectorProvider is everything the
// service asks of such a provider; provider.ts picks the implementation from the configuration.

/** The one message of a connector source on a service without a provider. */
export const NOT_CONFIGURED_MESSAGE =
  'connector provider not configured: this service has no connector provider set up, so connector sources cannot connect';

/** A toolkit the provider offers (a service such as github, with its tools). */
export interface ConnectorToolkit {
  slug: string;
  name: string;
  description?: string;
}

/** Whose connection: one account per source at the provider, for one toolkit. */
export interface ConnectorSubject {
  /** The provider's user id: the service's organization and source (see connectorSubject). */
  userId: string;
  /** The toolkit's slug, lowercase (the source's authConfig.provider). */
  toolkit: string;
}

/** The provider's account of a subject and whether its sign-in is completed and usable. */
export interface ConnectorAccount {
  id: string;
  toolkit: string;
  /** The provider's own status word (ACTIVE, INITIATED, EXPIRED, ...), for messages. */
  status: string;
  connected: boolean;
}

export interface ConnectorTool {
  name: string;
  description?: string;
  /** JSON Schema of the arguments, always an object schema. */
  inputSchema: Record<string, unknown>;
}

export type ConnectorCallOutcome = { ok: true; text: string } | { ok: false; message: string };

/** The tools of one connected account for one run, and how a call of one is made. */
export interface ConnectorToolSet {
  readonly tools: readonly ConnectorTool[];
  call(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ConnectorCallOutcome>;
}

/**
 * Why a provider request failed, as the connect code classifies failures: `not_configured`
 * (the provider refuses the service's key, or lacks what the operator must set up there),
 * `unreachable`, `timeout`, `protocol_error` (an answer that is not the documented shape, or too
 * large). The message names the provider and the path, never the key.
 */
export class ConnectorError extends Error {
  readonly kind: 'not_configured' | 'refused' | 'unreachable' | 'timeout' | 'protocol_error';
  constructor(kind: ConnectorError['kind'], message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ConnectorError';
    this.kind = kind;
  }
}

export interface ConnectorProvider {
  /** The provider's name for messages (`composio`). */
  readonly name: string;
  /** The toolkits the provider offers (bounded: the first pages). */
  listToolkits(signal: AbortSignal): Promise<ConnectorToolkit[]>;
  /** Starts a sign-in of the subject: the provider's URL to send the person to. */
  startConnection(
    subject: ConnectorSubject,
    callbackUrl: string,
    signal: AbortSignal,
  ): Promise<{ url: string }>;
  /** The subject's account (a usable one first), or undefined when it never connected. */
  account(subject: ConnectorSubject, signal: AbortSignal): Promise<ConnectorAccount | undefined>;
  /** The tools of a connected account for a run: at most `maxTools`, in the provider's order. */
  openTools(
    subject: ConnectorSubject,
    account: ConnectorAccount,
    options: { maxTools: number; signal: AbortSignal },
  ): Promise<ConnectorToolSet>;
}
