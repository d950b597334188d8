// The HTTP plumbing of the tools that make requests (api sources, the local fetch_url):
// reading a response body without holding more than a bounded number of bytes, telling what a
// failed fetch means without leaking anything secret into the message, and for api sources
// keeping every request, and its credentials, under the source's base URL.

import { type FetchLike, OutboundUrlError } from '../../lib/outbound.ts';
import { type AppliedAuth, withAuthQuery } from './auth.ts';
import { redact } from './redact.ts';
import { capText, type ToolCallOutcome } from './types.ts';

/** Bytes of an api answer the model gets to read. */
export const MAX_RESPONSE_BYTES = 1024 * 1024;
const MAX_ERROR_EXCERPT = 4_000;
const MAX_REDIRECTS = 5;

export interface BodyText {
  text: string;
  /** The body had more bytes than the limit; `text` holds the first ones. */
  truncated: boolean;
}

/**
 * Reads at most `maxBytes` of a response body as UTF-8 text and cancels the rest of the
 * stream, so a huge or endless answer costs no more than the limit.
 */
export async function readBodyText(response: Response, maxBytes: number): Promise<BodyText> {
  if (!response.body) return { text: '', truncated: false };
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = maxBytes - size;
      if (value.byteLength > room) {
        chunks.push(value.subarray(0, room));
        size += room;
        truncated = true;
        break;
      }
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    if (truncated) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
  // A multi-byte character cut at the limit decodes to U+FFFD: harmless for the model.
  return { text: new TextDecoder().decode(Buffer.concat(chunks)), truncated };
}

/** Whether a content type is text the model can read (an absent type is taken as text). */
export function isTextual(contentType: string | null): boolean {
  if (!contentType) return true;
  const type = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  return (
    type === '' ||
    type.startsWith('text/') ||
    /[/+](json|xml|javascript|ecmascript|x-www-form-urlencoded|yaml|x-yaml|csv|graphql)$/.test(type)
  );
}

export type FetchFailure = { kind: 'refused' | 'unreachable' | 'aborted'; message: string };

const errorCode = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
};

/**
 * What a rejected fetch means. undici rejects with `TypeError: fetch failed` and the real
 * reason (a connection error, or the guard's refusal from the DNS lookup) in `cause`, so the
 * chain is walked. `target` names the place (an origin and path, never a query string, which
 * may hold a key). Error texts can quote a header value (undici's invalid-header errors do),
 * so the `secrets` sent with the request are blanked out of the message.
 */
export function describeFetchError(
  err: unknown,
  target: string,
  secrets: readonly string[] = [],
): FetchFailure {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof OutboundUrlError) {
      return e.reason === 'unresolvable'
        ? { kind: 'unreachable', message: e.message }
        : { kind: 'refused', message: e.message };
    }
    const name = (e as { name?: unknown }).name;
    if (name === 'AbortError' || name === 'TimeoutError') {
      return { kind: 'aborted', message: `the request to ${target} was aborted` };
    }
    const code = errorCode(e);
    if (code) return { kind: 'unreachable', message: `could not reach ${target} (${code})` };
  }
  const detail =
    err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
  return { kind: 'unreachable', message: `the request to ${target} failed: ${redact(detail, secrets)}` };
}

/** An origin and path for messages: the query string may carry an api key, so it is left out. */
export const describeUrl = (url: URL): string => `${url.origin}${url.pathname}`;

type Auth = Extract<AppliedAuth, { ok: true }>;

/** What the calls of one connection share. */
export interface ApiContext {
  base: URL;
  auth: Auth;
  fetch: FetchLike;
  /** Values to blank out of error messages. */
  secrets: string[];
  /** The credentials' forms to blank out of the answers the model reads (see credentialValues). */
  credentials: string[];
}

/** The base URL's path without its trailing slash ('' for the root). */
const basePath = (base: URL) => base.pathname.replace(/\/+$/, '');

/** Whether a URL is the base URL's origin under its path (a path prefix ends at a segment). */
export function isUnderBase(url: URL, base: URL): boolean {
  const prefix = basePath(base);
  return (
    url.origin === base.origin &&
    (prefix === '' || url.pathname === prefix || url.pathname.startsWith(`${prefix}/`))
  );
}

/**
 * A path (with an optional query) under the base URL: `/items?x=1` under `https://x/api/v1` is
 * `https://x/api/v1/items?x=1`. An absolute URL is taken as it is; the caller checks the
 * result with isUnderBase, which dot segments, other hosts and `//host` paths fail.
 */
export function resolveUnderBase(path: string, base: URL): URL {
  const absolute = /^[a-z][a-z0-9+.-]*:/i.test(path) || /^[/\\]{2}/.test(path);
  const url = absolute
    ? new URL(path, base)
    : new URL(`${basePath(base)}/${path.replace(/^\/+/, '')}`, base.origin);
  url.hash = '';
  for (const [name, value] of base.searchParams)
    if (!url.searchParams.has(name)) url.searchParams.append(name, value);
  return url;
}

/**
 * A fetch that follows redirects only within the base URL's origin. Auth can live in any
 * header or in the query, so it must not travel to another origin: a redirect there is
 * returned to the caller as it is.
 */
export async function fetchWithinOrigin(ctx: ApiContext, url: URL, init: RequestInit): Promise<Response> {
  let request = init;
  let target = url;
  for (let hop = 0; ; hop++) {
    const response = await ctx.fetch(withAuthQuery(target, ctx.auth.query), {
      ...request,
      redirect: 'manual',
    });
    const location = response.headers.get('location');
    if (response.status < 300 || response.status > 399 || !location || hop >= MAX_REDIRECTS) return response;
    const next = new URL(location, target);
    if (next.origin !== ctx.base.origin) return response;
    await response.body?.cancel();
    target = next;
    if (
      response.status === 303 ||
      ((response.status === 301 || response.status === 302) && request.method === 'POST')
    ) {
      const { body: _body, ...rest } = request;
      request = { ...rest, method: 'GET' };
    }
  }
}

/** Sends one request and turns the answer into the outcome the model reads. Never throws. */
export async function send(
  ctx: ApiContext,
  method: string,
  url: URL,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal,
): Promise<ToolCallOutcome> {
  const where = describeUrl(url);
  if (!isUnderBase(url, ctx.base)) {
    return { ok: false, message: `${where} is outside this source's base URL ${describeUrl(ctx.base)}` };
  }
  try {
    // Headers set in order, so a name given twice in different case is one header, and the
    // auth headers come last.
    const all = new Headers({ accept: 'application/json, */*;q=0.5' });
    for (const source of [headers, ctx.auth.headers])
      for (const [k, v] of Object.entries(source)) all.set(k, v);
    const response = await fetchWithinOrigin(ctx, url, {
      method,
      headers: all,
      ...(body === undefined ? {} : { body }),
      signal,
    });
    const type = response.headers.get('content-type');
    let text: string;
    if (isTextual(type)) {
      const read = await readBodyText(response, MAX_RESPONSE_BYTES);
      // An API that echoes the request (a debugging endpoint, an error page) must not hand the
      // model the source's credentials.
      const body = redact(read.text, ctx.credentials);
      text = read.truncated ? `${body}\n[body cut at ${MAX_RESPONSE_BYTES} bytes]` : body;
    } else {
      await response.body?.cancel();
      text = `[${type} body not shown]`;
    }
    if (response.status >= 400) {
      return { ok: false, message: `HTTP ${response.status}: ${capText(text, MAX_ERROR_EXCERPT)}` };
    }
    const location = response.headers.get('location');
    const head =
      location && response.status >= 300
        ? `HTTP ${response.status}\nLocation: ${redact(location, ctx.secrets)}`
        : `HTTP ${response.status}`;
    return { ok: true, text: capText(`${head}\n${text}`) };
  } catch (err) {
    return { ok: false, message: describeFetchError(err, where, ctx.secrets).message };
  }
}
