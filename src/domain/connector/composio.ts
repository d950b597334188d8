// The Composio implementation of the connector seam, over its v3 REST API (base
// https://backend.composio.dev, header `x-api-key`), with these endpoints only:
//
//   GET  /api/v3/toolkits                         toolkits: { items: [{ slug, name, meta }], next_cursor }
//   GET  /api/v3/auth_configs?toolkit_slug=       the operator's auth configs of a toolkit: { items: [{ id, status, toolkit }] }
//   POST /api/v3/connected_accounts/link          { auth_config_id, user_id, callback_url } -> { redirect_url, connected_account_id, link_token, expires_at }
//   GET  /api/v3/connected_accounts?user_ids=&toolkit_slugs=   { items: [{ id, status, is_disabled, toolkit: { slug } }] }
//   GET  /api/v3/tools?toolkit_slug=&cursor=      { items: [{ slug, name, description, input_parameters, version }], next_cursor }
//   POST /api/v3/tools/execute/{tool_slug}        { connected_account_id, user_id, arguments, version } -> { data, error, successful }
//
// Only the fields named here are read; everything else in an answer (an account's `state`
// holds the end user's tokens) is parsed and dropped, never logged or stored.
import type { FetchLike } from '../../lib/outbound.ts';
import {
  CONNECTOR_CALL_TIMEOUT_MS,
  CONNECTOR_REQUEST_TIMEOUT_MS,
  type JsonAnswer,
  providerMessage,
  requestJson,
} from './http.ts';
import {
  type ConnectorAccount,
  type ConnectorCallOutcome,
  ConnectorError,
  type ConnectorProvider,
  type ConnectorSubject,
  type ConnectorTool,
  type ConnectorToolkit,
  type ConnectorToolSet,
} from './types.ts';

/** Pages of one list read at most (toolkits, tools): a provider that pages forever is cut off. */
const MAX_PAGES = 20;
const PAGE_SIZE = 100;

type Json = Record<string, unknown>;
const obj = (v: unknown): Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : {};
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

export interface ComposioOptions {
  apiBase: string;
  apiKey: string;
  fetch: FetchLike;
}

export class ComposioProvider implements ConnectorProvider {
  readonly name = 'composio';
  readonly #options: ComposioOptions;

  constructor(options: ComposioOptions) {
    this.#options = options;
  }

  async #call(
    method: 'GET' | 'POST',
    path: string,
    o: { query?: Record<string, string>; body?: unknown; signal: AbortSignal; timeoutMs?: number },
  ): Promise<JsonAnswer> {
    const url = new URL(`${this.#options.apiBase}${path}`);
    for (const [k, v] of Object.entries(o.query ?? {})) url.searchParams.set(k, v);
    return requestJson(this.#options.fetch, {
      method,
      url,
      headers: { 'x-api-key': this.#options.apiKey },
      body: o.body,
      timeoutMs: o.timeoutMs ?? CONNECTOR_REQUEST_TIMEOUT_MS,
      signal: o.signal,
      secrets: [this.#options.apiKey],
    });
  }

  /** The answer's JSON when it is a 2xx object; else a ConnectorError with the provider's words. */
  #ok(answer: JsonAnswer, what: string): Json {
    if (
      answer.status >= 200 &&
      answer.status < 300 &&
      typeof answer.json === 'object' &&
      answer.json !== null
    )
      return answer.json as Json;
    const said = providerMessage(answer.json, [this.#options.apiKey]);
    const kind = answer.status >= 500 || answer.status < 300 ? 'protocol_error' : 'not_configured';
    throw new ConnectorError(
      kind,
      `composio ${what} failed: HTTP ${answer.status}${said ? `: ${said}` : ''}`,
    );
  }

  /** Every page of a cursor list, up to MAX_PAGES or `enough` items. */
  async #pages(path: string, query: Record<string, string>, signal: AbortSignal, enough = Infinity) {
    const items: Json[] = [];
    const cursors = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES && items.length < enough; page++) {
      const q = { ...query, limit: String(PAGE_SIZE), ...(cursor !== undefined && { cursor }) };
      const body = this.#ok(await this.#call('GET', path, { query: q, signal }), `GET ${path}`);
      if (!Array.isArray(body.items))
        throw new ConnectorError('protocol_error', `composio GET ${path}: no items`);
      items.push(...body.items.map(obj));
      cursor = str(body.next_cursor);
      if (cursor === undefined || cursors.has(cursor)) break;
      cursors.add(cursor);
    }
    return items.slice(0, enough);
  }

  async listToolkits(signal: AbortSignal): Promise<ConnectorToolkit[]> {
    const items = await this.#pages('/api/v3/toolkits', {}, signal);
    return items.flatMap((t) => {
      const slug = str(t.slug);
      if (!slug) return [];
      const description = str(obj(t.meta).description);
      return [{ slug, name: str(t.name) ?? slug, ...(description && { description }) }];
    });
  }

  async startConnection(
    subject: ConnectorSubject,
    callbackUrl: string,
    signal: AbortSignal,
  ): Promise<{ url: string }> {
    // The operator creates the toolkit's auth config in the provider's dashboard (managed by the
    // provider, or with their own OAuth app); the first enabled one of the toolkit is used.
    const configs = await this.#pages('/api/v3/auth_configs', { toolkit_slug: subject.toolkit }, signal, 50);
    const config = configs.find(
      (c) =>
        str(c.id) !== undefined &&
        (c.status === undefined || c.status === 'ENABLED') &&
        (str(obj(c.toolkit).slug) ?? subject.toolkit).toLowerCase() === subject.toolkit,
    );
    if (!config) {
      throw new ConnectorError(
        'not_configured',
        `composio has no enabled auth config for toolkit "${subject.toolkit}"; the operator creates one in its dashboard`,
      );
    }
    const body = this.#ok(
      await this.#call('POST', '/api/v3/connected_accounts/link', {
        body: { auth_config_id: config.id, user_id: subject.userId, callback_url: callbackUrl },
        signal,
      }),
      'POST /api/v3/connected_accounts/link',
    );
    const url = str(body.redirect_url);
    if (!url || !/^https?:/i.test(url) || !URL.canParse(url)) {
      throw new ConnectorError(
        'protocol_error',
        'composio answered a sign-in link that is not an http(s) URL',
      );
    }
    return { url };
  }

  async account(subject: ConnectorSubject, signal: AbortSignal): Promise<ConnectorAccount | undefined> {
    const items = await this.#pages(
      '/api/v3/connected_accounts',
      { user_ids: subject.userId, toolkit_slugs: subject.toolkit, order_by: 'updated_at' },
      signal,
      PAGE_SIZE,
    );
    const accounts = items.flatMap((a): ConnectorAccount[] => {
      const id = str(a.id);
      const toolkit = (str(obj(a.toolkit).slug) ?? '').toLowerCase();
      if (!id || toolkit !== subject.toolkit) return [];
      const status = str(a.status) ?? 'UNKNOWN';
      return [{ id, toolkit, status, connected: status === 'ACTIVE' && a.is_disabled !== true }];
    });
    return accounts.find((a) => a.connected) ?? accounts[0];
  }

  async openTools(
    subject: ConnectorSubject,
    account: ConnectorAccount,
    options: { maxTools: number; signal: AbortSignal },
  ): Promise<ConnectorToolSet> {
    const items = await this.#pages(
      '/api/v3/tools',
      { toolkit_slug: subject.toolkit },
      options.signal,
      options.maxTools,
    );
    const versions = new Map<string, string | undefined>();
    const tools: ConnectorTool[] = [];
    for (const t of items) {
      const name = str(t.slug);
      if (!name || versions.has(name)) continue;
      versions.set(name, str(t.version));
      const schema = obj(t.input_parameters);
      const description = str(t.description) ?? str(t.name);
      tools.push({
        name,
        ...(description && { description }),
        inputSchema: schema.type === 'object' ? schema : { type: 'object', properties: {} },
      });
    }
    const call = async (
      name: string,
      args: Record<string, unknown>,
      signal: AbortSignal,
    ): Promise<ConnectorCallOutcome> => {
      const version = versions.get(name);
      const answer = await this.#call('POST', `/api/v3/tools/execute/${encodeURIComponent(name)}`, {
        body: {
          connected_account_id: account.id,
          user_id: subject.userId,
          arguments: args,
          ...(version && { version }),
        },
        signal,
        timeoutMs: CONNECTOR_CALL_TIMEOUT_MS,
      });
      const body = obj(answer.json);
      if (answer.status < 200 || answer.status >= 300 || body.successful !== true) {
        const said = providerMessage(answer.json, [this.#options.apiKey]);
        return {
          ok: false,
          message: `composio ran ${name} without success${said ? `: ${said}` : ` (HTTP ${answer.status})`}`,
        };
      }
      return { ok: true, text: JSON.stringify(body.data ?? null) };
    };
    return { tools, call };
  }
}
