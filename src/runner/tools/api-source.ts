// An api source: an HTTP API under `config.baseUrl`. With an OpenAPI 3 JSON document (at
// `config.openapiUrl`, or found at `<baseUrl>/openapi.json`) each operation becomes a tool;
// without one the model gets a single generic `http_request` tool. Every request goes through
// the guarded fetch and stays under baseUrl, the one address the user configured and the
// source's credentials are meant for.

import { assertOutboundUrl, OutboundUrlError } from '../../lib/outbound.ts';
import { formatBytes } from '../capped-response.ts';
import { applySourceAuth } from './auth.ts';
import {
  type ApiContext,
  describeFetchError,
  describeUrl,
  fetchWithinOrigin,
  readBodyText,
  resolveUnderBase,
  send,
} from './http-request.ts';
import {
  type ApiOperation,
  isOpenApi3,
  type OpenApiDocument,
  operationRequest,
  operationsFromOpenApi,
} from './openapi-tools.ts';
import { credentialValues, secretValues } from './redact.ts';
import type {
  ConnectErrorType,
  ConnectOptions,
  ConnectResult,
  SourceToConnect,
  ToolCallOutcome,
  ToolConnection,
  ToolDefinition,
} from './types.ts';

const MAX_DOCUMENT_BYTES = 2 * 1024 * 1024;
const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** Headers a caller of http_request may not set: the source's auth and the transport own them. */
const RESERVED_HEADERS = [
  'host',
  'authorization',
  'proxy-authorization',
  'cookie',
  'content-length',
  'transfer-encoding',
  'connection',
];

const stringRecord = (value: unknown): Record<string, string> | undefined =>
  value !== null &&
  typeof value === 'object' &&
  !Array.isArray(value) &&
  Object.values(value).every((v) => typeof v === 'string')
    ? (value as Record<string, string>)
    : undefined;

const HTTP_REQUEST_TOOL: ToolDefinition = {
  name: 'http_request',
  description:
    "Sends an HTTP request to this API and returns the status and body. The path is relative to the API's base URL.",
  inputSchema: {
    type: 'object',
    properties: {
      method: { type: 'string', enum: [...HTTP_METHODS], default: 'GET' },
      path: {
        type: 'string',
        description: 'Path relative to the base URL, with an optional query, e.g. "/items?x=1"',
      },
      query: { type: 'object', additionalProperties: { type: 'string' }, description: 'Query parameters' },
      body: { description: 'JSON body (not for GET)' },
      headers: {
        type: 'object',
        additionalProperties: { type: 'string' },
        description: 'Extra request headers',
      },
    },
    required: ['path'],
  },
};

/** The generic tool of an API without a document, confined to the base URL. */
async function httpRequest(
  ctx: ApiContext,
  args: Record<string, unknown>,
  signal: AbortSignal,
): Promise<ToolCallOutcome> {
  const method = typeof args.method === 'string' ? args.method.toUpperCase() : 'GET';
  if (!(HTTP_METHODS as readonly string[]).includes(method)) {
    return { ok: false, message: `method must be one of ${HTTP_METHODS.join(', ')}` };
  }
  if (typeof args.path !== 'string') return { ok: false, message: 'path must be a string, e.g. "/items"' };
  const query = args.query === undefined ? {} : stringRecord(args.query);
  const extra = args.headers === undefined ? {} : stringRecord(args.headers);
  if (!query || !extra) return { ok: false, message: 'query and headers must be objects of strings' };
  const reserved = new Set([
    ...RESERVED_HEADERS,
    ...Object.keys(ctx.auth.headers).map((h) => h.toLowerCase()),
  ]);
  const refused = Object.keys(extra).find((h) => reserved.has(h.toLowerCase()));
  if (refused)
    return {
      ok: false,
      message: `the ${refused} header cannot be set: the source sets it (or it is not allowed)`,
    };
  if (args.body !== undefined && method === 'GET')
    return { ok: false, message: 'a GET request cannot have a body' };
  let url: URL;
  try {
    url = resolveUnderBase(args.path, ctx.base);
  } catch {
    return { ok: false, message: `${args.path.slice(0, 200)} is not a valid path` };
  }
  for (const [name, value] of Object.entries(query)) url.searchParams.append(name, value);
  const headers = { ...extra };
  let body: string | undefined;
  const hasType = Object.keys(extra).some((h) => h.toLowerCase() === 'content-type');
  // A string with its own content type goes as it is (text, XML, a form); anything else is JSON.
  if (typeof args.body === 'string' && hasType) body = args.body;
  else if (args.body !== undefined) {
    body = JSON.stringify(args.body);
    if (!hasType) headers['content-type'] = 'application/json';
  }
  return send(ctx, method, url, headers, body, signal);
}

/** The request of an operation tool, built from the document's template and the arguments. */
async function callOperation(
  ctx: ApiContext,
  op: ApiOperation,
  args: Record<string, unknown>,
  signal: AbortSignal,
): Promise<ToolCallOutcome> {
  const request = operationRequest(op, args);
  if (!request.ok) return request;
  const url = resolveUnderBase(request.path, ctx.base);
  for (const [name, value] of request.query) url.searchParams.append(name, value);
  if (request.body === undefined) return send(ctx, op.method, url, {}, undefined, signal);
  return send(
    ctx,
    op.method,
    url,
    { 'content-type': 'application/json' },
    JSON.stringify(request.body),
    signal,
  );
}

type Discovery =
  | { ok: true; doc?: OpenApiDocument }
  | { ok: false; errorType: ConnectErrorType; message: string };

/**
 * Finds the API's OpenAPI document. One that was asked for (config.openapiUrl) must load;
 * the guessed `<baseUrl>/openapi.json` may be missing or be something else, and then the
 * source falls back to http_request. A refusal, no connection or refused credentials fail
 * either way: they would fail every call too.
 */
async function loadDocument(
  ctx: ApiContext,
  openapiUrl: string | undefined,
  signal: AbortSignal,
): Promise<Discovery> {
  let url: URL;
  try {
    url = openapiUrl === undefined ? resolveUnderBase('openapi.json', ctx.base) : new URL(openapiUrl);
  } catch {
    return { ok: false, errorType: 'protocol_error', message: 'config.openapiUrl is not a valid URL' };
  }
  const where = describeUrl(url);
  const unusable = (why: string): Discovery =>
    openapiUrl === undefined
      ? { ok: true }
      : {
          ok: false,
          errorType: 'protocol_error',
          message: `the OpenAPI document at ${where} cannot be used: ${why}`,
        };
  // The credentials are for the base URL's origin only: a document hosted elsewhere is fetched
  // without them.
  const withAuth = url.origin === ctx.base.origin;
  const headers = { accept: 'application/json', ...(withAuth ? ctx.auth.headers : {}) };
  let text: string;
  try {
    const response = withAuth
      ? await fetchWithinOrigin(ctx, url, { headers, signal })
      : await ctx.fetch(url, { headers, signal });
    if (!response.ok) await response.body?.cancel();
    if (response.status === 401 || response.status === 403) {
      return withAuth
        ? {
            ok: false,
            errorType: 'auth_failed',
            message: `${where} answered HTTP ${response.status}: the API refused the source's credentials`,
          }
        : unusable(`HTTP ${response.status} (credentials are only sent to the base URL's origin)`);
    }
    if (!response.ok) return unusable(`HTTP ${response.status}`);
    const body = await readBodyText(response, MAX_DOCUMENT_BYTES);
    if (body.truncated) return unusable(`it is larger than ${formatBytes(MAX_DOCUMENT_BYTES)}`);
    text = body.text;
  } catch (err) {
    const failure = describeFetchError(err, where, ctx.secrets);
    const errorType = failure.kind === 'aborted' ? 'timeout' : failure.kind;
    return { ok: false, errorType, message: failure.message };
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return unusable('it is not JSON (YAML documents are not supported)');
  }
  return isOpenApi3(doc) ? { ok: true, doc } : unusable('it is not an OpenAPI 3 document with paths');
}

const noConnect = (message: string): ConnectResult => ({ ok: false, errorType: 'not_configured', message });

export async function connectApiSource(
  source: SourceToConnect,
  options: ConnectOptions,
): Promise<ConnectResult> {
  let base: URL;
  try {
    base = new URL(source.config.baseUrl ?? '');
  } catch {
    return noConnect('an api source needs config.baseUrl, an http or https URL');
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    return noConnect('config.baseUrl of an api source must be an http or https URL');
  }
  base.hash = '';
  const auth = applySourceAuth(source);
  if (!auth.ok) return auth;
  // Checked here too, not only by the first fetch: with a document hosted elsewhere, the
  // base URL would otherwise first be checked at the model's first call.
  try {
    await assertOutboundUrl(base, options.config);
  } catch (err) {
    if (!(err instanceof OutboundUrlError)) throw err;
    return {
      ok: false,
      errorType: err.reason === 'unresolvable' ? 'unreachable' : 'refused',
      message: err.message,
    };
  }
  const ctx: ApiContext = {
    base,
    auth,
    fetch: options.fetch,
    // What a message must never show: the stored secrets and the values sent for auth.
    secrets: secretValues(source, [...Object.values(auth.headers), ...Object.values(auth.query)]),
    credentials: credentialValues(source),
  };
  const found = await loadDocument(ctx, source.config.openapiUrl, options.signal);
  if (!found.ok) return found;
  // The document's `servers` are ignored on purpose: the document comes from the remote end
  // (or any URL), and honouring its servers would let it send the source's credentials, and
  // the model's requests, to a host the user never configured. Requests go to baseUrl only.
  // A document without operations leaves the source with http_request, as no document does.
  const operations = found.doc ? operationsFromOpenApi(found.doc) : [];
  const byName = new Map(operations.map((op) => [op.tool.name, op]));
  const connection: ToolConnection = {
    tools: operations.length > 0 ? operations.map((op) => op.tool) : [HTTP_REQUEST_TOOL],
    async call(name, args, signal) {
      const op = byName.get(name);
      if (op) return callOperation(ctx, op, args, signal);
      if (operations.length === 0 && name === HTTP_REQUEST_TOOL.name) return httpRequest(ctx, args, signal);
      return { ok: false, message: `this source has no tool named ${name}` };
    },
    async close() {},
  };
  return { ok: true, connection };
}
