// One bounded JSON request to a connector provider: a time limit, a byte limit on the answer
// (the rest of the transfer is cancelled), no redirects (the API key is a header of its own,
// which a redirect to another origin would carry along), and failures as ConnectorErrors whose
// messages name the provider and the path but never the key or the query string.
import type { FetchLike } from '../../lib/outbound.ts';
import { OutboundUrlError } from '../../lib/outbound.ts';
import { ConnectorError } from './types.ts';

/** Bytes of one provider answer; past them the request fails (a tool list page, a tool's result). */
export const MAX_CONNECTOR_ANSWER_BYTES = 4 * 1024 * 1024;
/** A provider request (a list, a sign-in start, an account lookup) gives up after this long. */
export const CONNECTOR_REQUEST_TIMEOUT_MS = 15_000;
/** A tool call through the provider gives up after this long (an MCP tool call's limit). */
export const CONNECTOR_CALL_TIMEOUT_MS = 120_000;
/** Characters of a provider's error text kept in a message. */
const EXCERPT_CHARS = 300;

export interface JsonRequest {
  method: 'GET' | 'POST';
  url: URL;
  headers: Record<string, string>;
  body?: unknown;
  timeoutMs: number;
  signal: AbortSignal;
  /** Values blanked out of any text the provider sends back (its API key). */
  secrets: readonly string[];
}

export interface JsonAnswer {
  status: number;
  /** The parsed body; undefined when it was empty. */
  json: unknown;
}

const blank = (text: string, secrets: readonly string[]) =>
  secrets.reduce((t, s) => (s ? t.replaceAll(s, '[redacted]') : t), text);

/** The provider's own words for a failed request, from its error envelope, cut short. */
export function providerMessage(json: unknown, secrets: readonly string[]): string | undefined {
  const o = (json ?? {}) as { error?: unknown; message?: unknown };
  const inner = typeof o.error === 'object' && o.error !== null ? (o.error as { message?: unknown }) : {};
  const text = [inner.message, o.error, o.message].find((v): v is string => typeof v === 'string');
  return text === undefined ? undefined : blank(text, secrets).slice(0, EXCERPT_CHARS);
}

async function readCapped(response: Response, what: string): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_CONNECTOR_ANSWER_BYTES) {
      await reader.cancel().catch(() => undefined);
      throw new ConnectorError(
        'protocol_error',
        `${what} answered more than ${MAX_CONNECTOR_ANSWER_BYTES / 1024 / 1024} MiB`,
      );
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

/** Sends the request and parses the JSON answer, whatever its status (the caller judges it). */
export async function requestJson(fetch: FetchLike, request: JsonRequest): Promise<JsonAnswer> {
  const what = `the connector provider (${request.method} ${request.url.origin}${request.url.pathname})`;
  const timeout = AbortSignal.timeout(request.timeoutMs);
  const signal = AbortSignal.any([request.signal, timeout]);
  const headers: Record<string, string> = { accept: 'application/json', ...request.headers };
  if (request.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  let text: string;
  try {
    response = await fetch(request.url, {
      method: request.method,
      headers,
      ...(request.body !== undefined && { body: JSON.stringify(request.body) }),
      redirect: 'manual',
      signal,
    });
    text = await readCapped(response, what);
  } catch (err) {
    if (err instanceof ConnectorError) throw err;
    if (timeout.aborted) {
      throw new ConnectorError('timeout', `${what} did not answer within ${request.timeoutMs / 1000} s`);
    }
    if (request.signal.aborted) {
      // The caller's own deadline is a time-out like the request's; any other abort is theirs.
      if ((request.signal.reason as { name?: unknown } | undefined)?.name !== 'TimeoutError') throw err;
      throw new ConnectorError('timeout', `${what} did not answer in time`);
    }
    for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
      if (e instanceof OutboundUrlError) {
        throw new ConnectorError(e.reason === 'refused' ? 'refused' : 'unreachable', `${what}: ${e.message}`);
      }
      const code = (e as { code?: unknown }).code;
      if (typeof code === 'string')
        throw new ConnectorError('unreachable', `could not reach ${what} (${code})`);
    }
    throw new ConnectorError('unreachable', `could not reach ${what}`, { cause: err });
  }
  if (response.status >= 300 && response.status < 400) {
    throw new ConnectorError('protocol_error', `${what} answered a redirect (HTTP ${response.status})`);
  }
  if (response.status === 401 || response.status === 403) {
    const said = providerMessage(safeParse(text), request.secrets);
    throw new ConnectorError(
      'not_configured',
      `${what} refused the service's API key (HTTP ${response.status}${said ? `: ${said}` : ''}); check SVC_CONNECTOR_API_KEY`,
    );
  }
  if (text.trim() === '') return { status: response.status, json: undefined };
  const json = safeParse(text);
  if (json === undefined) {
    throw new ConnectorError('protocol_error', `${what} answered HTTP ${response.status} that is not JSON`);
  }
  return { status: response.status, json };
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
