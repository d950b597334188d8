// A local server speaking Composio's v3 REST API (https://backend.composio.dev/api/v3), for the
// connector provider seam's tests. It implements the endpoints the service calls, with the
// request and answer shapes of Composio's API reference: `x-api-key` authentication, cursor
// pages of `items` with `next_cursor`, the error envelope `{ error: { message, code, status } }`,
// connected accounts with `status` and an opaque `state` (which, as at Composio, carries the end
// user's tokens), and tool execution answering `{ data, error, successful, log_id }`.
//
// The hosted sign-in is played by `GET /link/<token>` on this server: opening it marks the
// account ACTIVE and redirects to the callback URL with `status` and `connected_account_id`
// added, as Composio's Connect Link does.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ConnectorRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  apiKey: string | undefined;
  body: Record<string, unknown> | undefined;
}

export interface StandInAccount {
  id: string;
  userId: string;
  toolkit: string;
  authConfigId: string;
  status: 'INITIATED' | 'ACTIVE' | 'EXPIRED' | 'FAILED' | 'INACTIVE';
  callbackUrl: string | undefined;
  /** The end user's token at the provider: never to be seen by the service's users. */
  accessToken: string;
}

export interface StandInTool {
  slug: string;
  name: string;
  description: string;
  input_parameters: Record<string, unknown>;
  version: string;
  /** What executing it answers (as `data`), given the arguments and the account. */
  run: (args: Record<string, unknown>, account: StandInAccount) => unknown;
}

export interface ConnectorServer {
  url: string;
  apiKey: string;
  requests: ConnectorRequest[];
  accounts: Map<string, StandInAccount>;
  /** Tools per toolkit slug. */
  tools: Map<string, StandInTool[]>;
  /** Auth configs per toolkit slug (the operator's setup at the provider). */
  authConfigs: Map<string, { id: string; status: 'ENABLED' | 'DISABLED' }[]>;
  /** Items per page of the lists (Composio pages with `limit`; this caps it lower to test paging). */
  pageSize: number;
  /** The next request to a path (exact) answers this status and body instead. */
  failNext(path: string, status: number, body: unknown): void;
  /** The sign-in: what a person's browser does at the link (follows it to get the callback). */
  signIn(linkUrl: string): Promise<{ callbackUrl: string }>;
  close(): Promise<void>;
}

const id = (prefix: string) => `${prefix}_${randomBytes(6).toString('hex')}`;

export async function startConnectorServer(options: { apiKey?: string } = {}): Promise<ConnectorServer> {
  const apiKey = options.apiKey ?? `ak_${randomBytes(12).toString('hex')}`;
  const requests: ConnectorRequest[] = [];
  const accounts = new Map<string, StandInAccount>();
  const tools = new Map<string, StandInTool[]>();
  const authConfigs = new Map<string, { id: string; status: 'ENABLED' | 'DISABLED' }[]>();
  const links = new Map<string, string>();
  const failures = new Map<string, { status: number; body: unknown }>();
  let base = '';

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const error = (res: ServerResponse, status: number, message: string) =>
    send(res, status, { error: { message, code: status * 10, status, request_id: id('req') } });

  /** A cursor page of `items`: the cursor is the offset, base64-encoded like Composio's. */
  const page = (res: ServerResponse, query: URLSearchParams, items: unknown[]) => {
    const limit = Math.min(Number(query.get('limit') ?? 20) || 20, server.pageSize);
    const from = Number(Buffer.from(query.get('cursor') ?? '', 'base64').toString() || 0);
    const slice = items.slice(from, from + limit);
    const next = from + limit < items.length ? Buffer.from(String(from + limit)).toString('base64') : null;
    send(res, 200, {
      items: slice,
      next_cursor: next,
      total_pages: Math.ceil(items.length / limit),
      current_page: Math.floor(from / limit) + 1,
      total_items: items.length,
    });
  };

  const accountView = (a: StandInAccount) => ({
    id: a.id,
    status: a.status,
    is_disabled: false,
    status_reason: null,
    toolkit: { slug: a.toolkit },
    auth_config: { id: a.authConfigId, is_composio_managed: true, is_disabled: false },
    user_id: a.userId,
    state: { authScheme: 'OAUTH2', val: { status: a.status, access_token: a.accessToken } },
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
  });

  async function readBody(req: IncomingMessage): Promise<Record<string, unknown> | undefined> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (chunks.length === 0) return undefined;
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  }

  const httpServer = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', base);
    const path = url.pathname;
    let body: Record<string, unknown> | undefined;
    try {
      body = await readBody(req);
    } catch {
      return error(res, 400, 'Invalid JSON body');
    }
    const header = req.headers['x-api-key'];
    requests.push({
      method: req.method ?? '',
      path,
      query: url.searchParams,
      apiKey: typeof header === 'string' ? header : undefined,
      body,
    });

    // The hosted sign-in page: no API key, it is the person's browser.
    const link = /^\/link\/([^/]+)$/.exec(path);
    if (req.method === 'GET' && link) {
      const account = accounts.get(links.get(link[1] ?? '') ?? '');
      if (!account) return error(res, 404, 'Link not found or expired');
      account.status = 'ACTIVE';
      const back = new URL(account.callbackUrl ?? 'https://platform.composio.dev/done');
      back.searchParams.set('status', 'success');
      back.searchParams.set('connected_account_id', account.id);
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }

    const failure = failures.get(path);
    if (failure) {
      failures.delete(path);
      return send(res, failure.status, failure.body);
    }
    if (header !== apiKey) return error(res, 401, 'Invalid API key');

    if (req.method === 'GET' && path === '/api/v3/toolkits') {
      return page(
        res,
        url.searchParams,
        [...tools.keys()].map((slug) => ({
          slug,
          name: slug[0]?.toUpperCase() + slug.slice(1),
          is_local_toolkit: false,
          meta: { description: `The ${slug} toolkit`, logo: '', tools_count: tools.get(slug)?.length ?? 0 },
        })),
      );
    }
    if (req.method === 'GET' && path === '/api/v3/auth_configs') {
      const toolkit = url.searchParams.get('toolkit_slug') ?? '';
      return page(
        res,
        url.searchParams,
        (authConfigs.get(toolkit) ?? []).map((c) => ({
          id: c.id,
          uuid: c.id,
          name: `${toolkit} auth`,
          status: c.status,
          type: 'default',
          toolkit: { slug: toolkit, logo: '' },
          auth_scheme: 'OAUTH2',
          is_composio_managed: true,
          no_of_connections: 0,
        })),
      );
    }
    if (req.method === 'POST' && path === '/api/v3/connected_accounts/link') {
      const authConfigId = body?.auth_config_id;
      const userId = body?.user_id;
      if (typeof authConfigId !== 'string' || typeof userId !== 'string')
        return error(res, 400, 'auth_config_id and user_id are required');
      const toolkit = [...authConfigs].find(([, list]) => list.some((c) => c.id === authConfigId))?.[0];
      if (!toolkit) return error(res, 404, `Auth config ${authConfigId} not found`);
      const account: StandInAccount = {
        id: id('ca'),
        userId,
        toolkit,
        authConfigId,
        status: 'INITIATED',
        callbackUrl: typeof body?.callback_url === 'string' ? body.callback_url : undefined,
        accessToken: `end-user-token-${randomBytes(8).toString('hex')}`,
      };
      accounts.set(account.id, account);
      const token = id('lk');
      links.set(token, account.id);
      return send(res, 201, {
        link_token: token,
        redirect_url: `${base}/link/${token}`,
        expires_at: new Date(Date.now() + 600_000).toISOString(),
        connected_account_id: account.id,
      });
    }
    if (req.method === 'GET' && path === '/api/v3/connected_accounts') {
      const users = url.searchParams.get('user_ids')?.split(',');
      const toolkits = url.searchParams.get('toolkit_slugs')?.split(',');
      const list = [...accounts.values()]
        .filter((a) => (!users || users.includes(a.userId)) && (!toolkits || toolkits.includes(a.toolkit)))
        .reverse();
      return page(res, url.searchParams, list.map(accountView));
    }
    if (req.method === 'GET' && path === '/api/v3/tools') {
      const toolkit = url.searchParams.get('toolkit_slug') ?? '';
      return page(
        res,
        url.searchParams,
        (tools.get(toolkit) ?? []).map(({ run: _run, ...t }) => ({
          ...t,
          toolkit: { slug: toolkit, name: toolkit, logo: '' },
          available_versions: [t.version],
          is_deprecated: false,
          no_auth: false,
          output_parameters: {},
          scopes: [],
          tags: [],
        })),
      );
    }
    const execute = /^\/api\/v3\/tools\/execute\/([^/]+)$/.exec(path);
    if (req.method === 'POST' && execute) {
      const slug = decodeURIComponent(execute[1] ?? '');
      const tool = [...tools.values()].flat().find((t) => t.slug === slug);
      if (!tool) return error(res, 404, `Tool ${slug} not found`);
      const account = accounts.get(String(body?.connected_account_id ?? ''));
      if (!account || account.userId !== body?.user_id) return error(res, 400, 'Connected account not found');
      if (account.status !== 'ACTIVE') {
        return send(res, 200, {
          data: {},
          error: `Connected account ${account.id} is ${account.status}`,
          successful: false,
          log_id: id('log'),
        });
      }
      const args = (body?.arguments ?? {}) as Record<string, unknown>;
      return send(res, 200, {
        data: tool.run(args, account),
        error: null,
        successful: true,
        log_id: id('log'),
      });
    }
    return error(res, 404, `No route ${req.method} ${path}`);
  });

  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`;

  const server: ConnectorServer = {
    url: base,
    apiKey,
    requests,
    accounts,
    tools,
    authConfigs,
    pageSize: 100,
    failNext: (path, status, body) => failures.set(path, { status, body }),
    async signIn(linkUrl) {
      const res = await fetch(linkUrl, { redirect: 'manual' });
      const location = res.headers.get('location');
      if (res.status !== 302 || !location) throw new Error(`the sign-in link answered ${res.status}`);
      return { callbackUrl: location };
    },
    close: () =>
      new Promise<void>((resolve) => {
        httpServer.closeAllConnections();
        httpServer.close(() => resolve());
      }),
  };
  return server;
}
