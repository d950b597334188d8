// Connects an mcp source (stdio, Streamable HTTP with the SSE fallback, or WebSocket), lists
// its tools and wraps the SDK client into a ToolConnection. Every failure becomes a
// ConnectResult naming the source; no message carries a credential or env value.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  isLoaderVariable,
  LOADER_VARIABLE_MESSAGE,
  notAllowedMessage,
} from '../../../lib/loader-variables.ts';
import type { FetchLike } from '../../../lib/outbound.ts';
import { capResponse, formatBytes, type ResponseTooLargeError } from '../../capped-response.ts';
import { applySourceAuth, withAuthQuery } from '../auth.ts';
import { redact, redactExcerpt, secretValues } from '../redact.ts';
import {
  MAX_MCP_MESSAGE_BYTES,
  MAX_SOURCE_TOOLS_BYTES,
  MAX_TOOL_DEFINITION_BYTES,
  MAX_TOOLS_PER_SOURCE,
} from '../tool-bounds.ts';
import {
  type ConnectErrorType,
  type ConnectOptions,
  type ConnectResult,
  capText,
  type SourceToConnect,
  type ToolCallOutcome,
  type ToolConnection,
  type ToolDefinition,
} from '../types.ts';
import { classify, errorText, httpStatus } from './classify-error.ts';
import { resultText } from './result-text.ts';
import { DEFAULT_SEARCH_PATH, StdioMcpTransport, StdioServerError } from './stdio-transport.ts';
import { WebSocketMcpTransport } from './websocket-transport.ts';

const CLIENT_INFO = { name: 'svc', version: '0.1.0' };
const MAX_TOOL_PAGES = 64;
/** A call without progress for this long fails; with progress notifications it may run to the total limit. */
const CALL_TIMEOUT_MS = 120_000;
const CALL_MAX_TOTAL_MS = 10 * 60_000;
const STDERR_IN_MESSAGE_CHARS = 500;
type Failure = Extract<ConnectResult, { ok: false }>;
interface Opened {
  client: Client;
  tools: ToolDefinition[];
}

export async function connectMcpSource(
  source: SourceToConnect,
  options: ConnectOptions,
): Promise<ConnectResult> {
  const redact = sourceRedactor(source);
  const fail = (errorType: ConnectErrorType, detail: string): Failure => ({
    ok: false,
    errorType,
    // Details are excerpts (server texts cut to a few hundred characters): a secret cut in two
    // by that cut is blanked too.
    message: capText(redact(`source "${source.name}": ${redactExcerpt(detail, secretValues(source))}`), 1000),
  });
  const transport = source.config.transport ?? (source.config.command !== undefined ? 'stdio' : 'http');
  if (transport === 'stdio') return connectStdio(source, options, fail);
  const auth = applySourceAuth(source);
  if (!auth.ok) return fail(auth.errorType, auth.message);
  let url: URL;
  try {
    url = new URL(source.config.url ?? '');
  } catch {
    return fail('not_configured', `the ${transport} transport needs a valid url in config`);
  }
  if (transport === 'websocket') {
    const ws = new WebSocketMcpTransport({
      url: withAuthQuery(url, auth.query),
      policy: { allowPrivateUrls: options.config.allowPrivateUrls },
      headers: auth.headers,
    });
    try {
      return connected(await openClient(ws, options), redact, () => ws.failure?.message);
    } catch (err) {
      if (ws.failure) return fail('protocol_error', ws.failure.message);
      return fail(...classify(err, options.signal));
    }
  }
  return connectHttp(url, auth, options, fail, redact);
}

async function connectStdio(
  source: SourceToConnect,
  options: ConnectOptions,
  fail: (t: ConnectErrorType, d: string) => Failure,
): Promise<ConnectResult> {
  const command = source.config.command;
  if (command === undefined || command === '')
    return fail('not_configured', 'the stdio transport needs a command');
  // Checked again here, not only when the source was saved: the operator may have changed the list.
  if (!options.config.stdioCommands.includes(command)) {
    return fail(
      'refused',
      `command "${command}" is not one of the commands this service lets stdio sources run (SVC_STDIO_COMMANDS)`,
    );
  }
  // Checked at each start too: a source stored before these rules (or before the operator
  // narrowed the command's allow-list) is refused as well.
  const names = Object.keys(source.secrets.env);
  const loader = names.find(isLoaderVariable);
  if (loader) return fail('refused', `config.env ${loader} ${LOADER_VARIABLE_MESSAGE}`);
  const allowed = options.config.stdioEnv?.get(command);
  const stranger = names.find((name) => !allowed?.has(name));
  if (stranger !== undefined)
    return fail('refused', `config.env ${stranger} ${notAllowedMessage(command, allowed)}`);
  const transport = new StdioMcpTransport({
    command,
    args: source.config.args ?? [],
    env: source.secrets.env,
    searchPath: options.config.stdioSearchPath || DEFAULT_SEARCH_PATH,
    user: options.config.stdioUser,
  });
  const exited = () => {
    // Killed by the transport for its output: that is the reason, not the kill.
    if (transport.failure) return transport.failure.message;
    const status = transport.unaskedExit;
    if (!status) return undefined;
    const how = status.signal ? `was killed by ${status.signal}` : `exited with code ${status.code}`;
    // Blanked before it is cut short: the kept stderr is itself the tail of a longer output, and
    // a secret cut in two by either cut would no longer match it.
    const stderr = redactExcerpt(transport.stderrText(), secretValues(source))
      .trim()
      .slice(0, STDERR_IN_MESSAGE_CHARS);
    return `the server ${how}${stderr ? `; its stderr: ${stderr}` : ' (nothing on stderr)'}`;
  };
  try {
    return connected(await openClient(transport, options), sourceRedactor(source), exited);
  } catch (err) {
    if (err instanceof StdioServerError && err.reason !== 'output_limit')
      return fail('unreachable', err.message);
    if (transport.failure) return fail('protocol_error', transport.failure.message);
    const death = exited();
    if (death && !options.signal.aborted)
      return fail('unreachable', `${death} before it answered the MCP initialize request`);
    return fail(...classify(err, options.signal));
  }
}

async function connectHttp(
  url: URL,
  auth: { headers: Record<string, string>; query: Record<string, string> },
  options: ConnectOptions,
  fail: (t: ConnectErrorType, d: string) => Failure,
  redact: (text: string) => string,
): Promise<ConnectResult> {
  // A message past the bound closes the transport: the SDK would otherwise wait out the
  // request's time-out for an answer that an event stream's error never delivers.
  let tooLarge: ResponseTooLargeError | undefined;
  let active: Transport | undefined;
  const overLimit = () =>
    tooLarge && `the server sent a message larger than ${formatBytes(MAX_MCP_MESSAGE_BYTES)}`;
  // Query auth is added to each request of the source's origin (so the POST endpoint an SSE
  // server names gets it too), and it never shows in the SDK's error messages.
  const fetch: FetchLike = async (input, init) => {
    const target = new URL(input);
    const response = await options.fetch(
      target.origin === url.origin ? withAuthQuery(target, auth.query) : target,
      init,
    );
    return capResponse(response, MAX_MCP_MESSAGE_BYTES, (err) => {
      tooLarge = err;
      void active?.close();
    });
  };
  const init = { fetch, requestInit: { headers: auth.headers } };
  const streamable = new StreamableHTTPClientTransport(url, init);
  active = streamable;
  let firstError: unknown;
  try {
    const opened = await openClient(streamable, options);
    return connected(opened, redact, overLimit, () => streamable.terminateSession());
  } catch (err) {
    const limit = overLimit();
    if (limit) return fail('protocol_error', limit);
    firstError = err;
  }
  const status = httpStatus(firstError);
  const oldServer = status !== undefined && status >= 400 && status < 500 && status !== 401 && status !== 403;
  if (!oldServer || options.signal.aborted) return fail(...classify(firstError, options.signal));
  // The spec's backwards compatibility: a 4xx to the initialize POST may be a server of the
  // older HTTP+SSE transport, which opens with a GET of an event stream at the same URL.
  try {
    const sse = new SSEClientTransport(url, init);
    active = sse;
    return connected(await openClient(sse, options), redact, overLimit);
  } catch (err) {
    const limit = overLimit();
    if (limit) return fail('protocol_error', limit);
    const sseStatus = httpStatus(err);
    if (sseStatus === 401 || sseStatus === 403 || options.signal.aborted)
      return fail(...classify(err, options.signal));
    return fail(
      'protocol_error',
      `${url.origin}${url.pathname} answered HTTP ${status} to the MCP initialize request and did not speak the older SSE transport either (${errorText(err)})`,
    );
  }
}

/** Connects the client (initialize) and lists the tools; on failure closes it, then throws. */
async function openClient(transport: Transport, options: ConnectOptions): Promise<Opened> {
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  const requestOptions = { signal: options.signal, timeout: options.timeoutMs };
  try {
    options.signal.throwIfAborted();
    await client.connect(transport, requestOptions);
    const tools: ToolDefinition[] = [];
    // A server without the tools capability has none to list (it may offer only resources).
    if (!client.getServerCapabilities()?.tools) return { client, tools };
    const names = new Set<string>();
    const cursors = new Set<string>();
    let cursor: string | undefined;
    let keptBytes = 0;
    let largest = 0;
    // Listing stops one tool, or one byte, past a bound of a source's tools: connectSource then
    // fails the source naming the bound, and no more pages are read (or held) meanwhile.
    const pastBounds = () =>
      tools.length > MAX_TOOLS_PER_SOURCE ||
      keptBytes > MAX_SOURCE_TOOLS_BYTES ||
      largest > MAX_TOOL_DEFINITION_BYTES;
    for (let page = 0; page < MAX_TOOL_PAGES && !pastBounds(); page++) {
      const result = await client.listTools(cursor === undefined ? undefined : { cursor }, requestOptions);
      for (const tool of result.tools) {
        if (pastBounds() || names.has(tool.name)) continue;
        names.add(tool.name);
        const definition: ToolDefinition = {
          name: tool.name,
          ...(tool.description === undefined ? {} : { description: tool.description }),
          inputSchema: tool.inputSchema as Record<string, unknown>,
        };
        tools.push(definition);
        const size = Buffer.byteLength(JSON.stringify(definition));
        keptBytes += size;
        largest = Math.max(largest, size);
      }
      cursor = result.nextCursor;
      if (cursor === undefined || cursors.has(cursor)) break;
      cursors.add(cursor);
    }
    return { client, tools };
  } catch (err) {
    await client.close().catch(() => {});
    throw err;
  }
}

function connected(
  { client, tools }: Opened,
  redact: (text: string) => string,
  describeDeath?: () => string | undefined,
  beforeClose?: () => Promise<void>,
): ConnectResult {
  let closing: Promise<void> | undefined;
  const connection: ToolConnection = {
    tools,
    async call(name, args, signal): Promise<ToolCallOutcome> {
      try {
        const result = await client.callTool({ name, arguments: args }, undefined, {
          signal,
          timeout: CALL_TIMEOUT_MS,
          resetTimeoutOnProgress: true,
          maxTotalTimeout: CALL_MAX_TOTAL_MS,
          onprogress: () => {},
        });
        const text = resultText(result);
        if (result.isError === true)
          return { ok: false, message: capText(text || 'the tool reported an error') };
        return { ok: true, text: capText(text) };
      } catch (err) {
        const death = describeDeath?.();
        const message = `tool ${name} failed: ${errorText(err)}${death ? ` (${death})` : ''}`;
        return { ok: false, message: capText(redact(message)) };
      }
    },
    close() {
      closing ??= (async () => {
        // Ending an HTTP session is a courtesy to the server; it must not hold up the close.
        if (beforeClose) await Promise.race([beforeClose().catch(() => {}), sleep(2000)]);
        await client.close().catch(() => {});
      })();
      return closing;
    },
  };
  return { ok: true, connection };
}

/** Blanks the source's secrets out of a message. */
function sourceRedactor(source: SourceToConnect): (text: string) => string {
  const secrets = secretValues(source);
  return (text) => redact(text, secrets);
}

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });
