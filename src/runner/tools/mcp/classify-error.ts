// Why an MCP connection failed, from the errors of the SDK, undici and our transports.
import { SseError } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { OutboundUrlError } from '../../../lib/outbound.ts';
import type { ConnectErrorType } from '../types.ts';
import { WebSocketHandshakeError } from './websocket-transport.ts';

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'UND_ERR_SOCKET',
]);
const TIMEOUT_CODES = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT']);

/** The error, its causes (and an AggregateError's errors), outermost first. */
function errorChain(err: unknown): unknown[] {
  const out: unknown[] = [];
  const queue = [err];
  while (queue.length > 0 && out.length < 16) {
    const e = queue.shift();
    if (e === undefined || e === null || out.includes(e)) continue;
    out.push(e);
    if (e instanceof AggregateError) queue.push(...e.errors);
    if (e instanceof WebSocketHandshakeError && 'error' in e.probe) queue.push(e.probe.error);
    if (e instanceof Error && e.cause !== undefined) queue.push(e.cause);
  }
  return out;
}

export function httpStatus(err: unknown): number | undefined {
  for (const e of errorChain(err)) {
    if (
      (e instanceof StreamableHTTPError || e instanceof SseError) &&
      typeof e.code === 'number' &&
      e.code >= 100
    ) {
      return e.code;
    }
    if (e instanceof WebSocketHandshakeError && 'status' in e.probe) return e.probe.status;
    // The SSE transport's POST errors carry the status only in the message.
    const inMessage = e instanceof Error ? /\(HTTP (\d{3})\)/.exec(e.message)?.[1] : undefined;
    if (inMessage) return Number(inMessage);
  }
  return undefined;
}

export function classify(err: unknown, signal: AbortSignal): [ConnectErrorType, string] {
  const chain = errorChain(err);
  const refusal = chain.find((e) => e instanceof OutboundUrlError);
  if (refusal instanceof OutboundUrlError) {
    // The guard throws the same error class when DNS has no answer: that is no refusal.
    return [refusal.reason === 'unresolvable' ? 'unreachable' : 'refused', refusal.message];
  }
  if (signal.aborted) return ['timeout', 'the connection attempt was stopped (timed out or cancelled)'];
  if (chain.some((e) => e instanceof McpError && e.code === ErrorCode.RequestTimeout)) {
    return ['timeout', 'the server did not answer in time'];
  }
  const status = httpStatus(err);
  if (status === 401 || status === 403) {
    return [
      'auth_failed',
      `the server refused the connection as unauthorized (HTTP ${status}); check the source's authType and authConfig`,
    ];
  }
  if (status === 101 || (status !== undefined && status >= 300)) {
    return ['protocol_error', `the server answered HTTP ${status}: ${errorText(err)}`];
  }
  const network = chain.find((e): e is Error & { code: string } => {
    const code = (e as { code?: unknown }).code;
    return (
      e instanceof Error &&
      typeof code === 'string' &&
      (UNREACHABLE_CODES.has(code) || TIMEOUT_CODES.has(code))
    );
  });
  if (network && TIMEOUT_CODES.has(network.code))
    return ['timeout', `the connection timed out (${network.code})`];
  if (network) return ['unreachable', `could not connect: ${errorText(network)}`];
  if (chain.some((e) => e instanceof McpError && e.code === ErrorCode.ConnectionClosed)) {
    return ['protocol_error', 'the server closed the connection before it answered'];
  }
  return ['protocol_error', errorText(err)];
}

export function errorText(err: unknown): string {
  let text = err instanceof Error ? err.message : String(err);
  // undici's "fetch failed" says nothing; its cause says what failed.
  if (err instanceof Error && err.cause instanceof Error && err.cause.message)
    text = `${text} (${err.cause.message})`;
  return text.trim().slice(0, 600) || (err instanceof Error ? err.name : 'unknown error');
}
