// The seam between the run engine and the sources of a task. Each source type (mcp, api,
// local) connects into a ToolConnection; the executor offers the connections' tools to the
// model under collision-free names and routes the model's calls back.
import type { Config } from '../../config.ts';
import type { ConnectorAccount, ConnectorSubject } from '../../domain/connector/types.ts';
import type { SourceSecrets } from '../../domain/sources.ts';
import type { FetchLike } from '../../lib/outbound.ts';
import type { AuthConfig, SourceConfig, SourceType } from '../../schemas/source.ts';

/** A tool as its source names and describes it (the Tool of the API). */
export interface ToolDefinition {
  name: string;
  description?: string;
  /** JSON Schema of the arguments: always an object schema. */
  inputSchema: Record<string, unknown>;
}

/**
 * What a tool call gave. A tool that fails is not a failed run: its message goes back to the
 * model, which may try something else, so both outcomes are text for the model.
 */
export type ToolCallOutcome = { ok: true; text: string } | { ok: false; message: string };

/** An open connection to one source; `close` ends it (a stdio server is killed). */
export interface ToolConnection {
  readonly tools: readonly ToolDefinition[];
  call(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolCallOutcome>;
  close(): Promise<void>;
}

/**
 * Why a source could not be connected, as a value:
 * - refused: the service's policy forbids it (a command off the allowlist, a private address);
 * - not_configured: something the source needs is not set up (credentials, connector provider);
 * - auth_failed: the remote end refused the credentials (401/403);
 * - unreachable: no connection (refused, DNS, the process would not start or exited);
 * - timeout: no answer in time;
 * - protocol_error: an answer that is not what the source type speaks.
 */
export type ConnectErrorType =
  | 'refused'
  | 'not_configured'
  | 'auth_failed'
  | 'unreachable'
  | 'timeout'
  | 'protocol_error';

export type ConnectResult =
  | { ok: true; connection: ToolConnection }
  | { ok: false; errorType: ConnectErrorType; message: string };

/** A stored source with its secrets opened: what a connector needs. */
export interface SourceToConnect {
  id: string;
  /** The owning organization (a connector source's account at the provider is named by it). */
  organizationId?: string;
  slug: string;
  name: string;
  type: SourceType;
  config: SourceConfig;
  authType: string | null;
  authConfig: AuthConfig | null;
  secrets: SourceSecrets;
}

export interface ConnectOptions {
  /** stdioEnv and stdioUser left out mean: no config.env variable allowed, the service's own user. */
  config: Pick<Config, 'stdioCommands' | 'stdioSearchPath' | 'allowPrivateUrls'> &
    Partial<Pick<Config, 'stdioEnv' | 'stdioUser' | 'connector'>>;
  /** A fetch that applies the SSRF guard (outboundFetch of the policy). */
  fetch: FetchLike;
  /** Connecting gives up after this long. */
  timeoutMs: number;
  /**
   * Aborts the connection attempt only. After connect, each call gets its own signal and the
   * owner ends the connection with close().
   */
  signal: AbortSignal;
  /** Told what the connector provider said of a connector source's account (to store it). */
  connectorAccount?: (account: ConnectorAccount | undefined, subject: ConnectorSubject) => Promise<void>;
}

/** Text a tool returns is cut to this many characters before it goes to the model. */
export const MAX_TOOL_OUTPUT_CHARS = 100_000;

export function capText(text: string, max = MAX_TOOL_OUTPUT_CHARS): string {
  return text.length <= max ? text : `${text.slice(0, max)}\n[output cut at ${max} characters]`;
}
