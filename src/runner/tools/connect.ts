// Connects a source of any type, with one time limit for all of them.
import { connectApiSource } from './api-source.ts';
import { connectConnectorSource } from './connector.ts';
import { connectLocalSource } from './local-tools.ts';
import { toolBoundsProblem } from './tool-bounds.ts';
import type { ConnectOptions, ConnectResult, SourceToConnect } from './types.ts';

function connectByType(source: SourceToConnect, options: ConnectOptions): Promise<ConnectResult> {
  // A connector source's tools come from its provider, whatever its type.
  if (source.authType === 'connector') return connectConnectorSource(source, options);
  switch (source.type) {
    case 'mcp':
      // The MCP SDK (and zod, which it brings) is loaded by the first run with an MCP source.
      return import('./mcp/connect-mcp.ts').then(({ connectMcpSource }) => connectMcpSource(source, options));
    case 'api':
      return connectApiSource(source, options);
    case 'local':
      return connectLocalSource(source, options);
  }
}

/** A connection whose tools break a bound is closed and becomes a failure naming the bound. */
async function withinBounds(source: SourceToConnect, result: ConnectResult): Promise<ConnectResult> {
  if (!result.ok) return result;
  const problem = toolBoundsProblem(result.connection.tools);
  if (problem === undefined) return result;
  await result.connection.close();
  return { ok: false, errorType: 'protocol_error', message: `source "${source.name}": ${problem}` };
}

/**
 * Connects the source and lists its tools. Gives up after `options.timeoutMs` (a connection
 * that arrives later is closed at once, so no stdio process outlives the attempt) and when
 * `options.signal` aborts.
 */
export async function connectSource(
  source: SourceToConnect,
  options: ConnectOptions,
): Promise<ConnectResult> {
  const attempt = new AbortController();
  const onAbort = () => attempt.abort(options.signal.reason);
  options.signal.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const timeout = new Promise<ConnectResult>((resolve) => {
    timer = setTimeout(() => {
      timedOut = true;
      attempt.abort(new Error('connection timed out'));
      resolve({
        ok: false,
        errorType: 'timeout',
        message: `source "${source.name}" did not connect within ${Math.round(options.timeoutMs / 1000)} s`,
      });
    }, options.timeoutMs);
  });
  const pending = connectByType(source, { ...options, signal: attempt.signal })
    .then((result) => withinBounds(source, result))
    .catch(
      (err: unknown): ConnectResult => ({
        ok: false,
        errorType: 'unreachable',
        message: `source "${source.name}" could not connect: ${err instanceof Error ? err.message : String(err)}`,
      }),
    );
  // A connection that arrives after the time limit is closed at once.
  void pending.then((late) => (timedOut && late.ok ? late.connection.close() : undefined));
  try {
    return await Promise.race([pending, timeout]);
  } finally {
    clearTimeout(timer);
    options.signal.removeEventListener('abort', onAbort);
  }
}
