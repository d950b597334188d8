import Fastify, { LogController } from 'fastify';
import { Authenticator } from '../domain/authenticator.ts';
import type { Deps } from '../domain/deps.ts';
import { errors } from '../lib/errors.ts';
import { capConnections, installJsonParser, serverBounds } from './connection.ts';
import { adminScope, apiKeyScope, publicScope } from './plugins/auth.ts';
import { installCompression } from './plugins/compression.ts';
import { installErrorHandling, sendError, toAppError } from './plugins/errors.ts';
import { installObservability, requestId } from './plugins/observability.ts';
import { installSecurityHeaders } from './plugins/security-headers.ts';
import { buildSerializer } from './plugins/serialization.ts';
import { installValidators } from './plugins/validation.ts';
import { lazyRequestLogger } from './request-logger.ts';
import { healthRoutes } from './routes/health.ts';
import type { App } from './types.ts';

/** Request bodies above this are refused with 413 before they are parsed. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * Path parameters up to this length reach their route (and its validation, after
 * authentication); Node refuses request heads above 16 KiB anyway.
 */
const MAX_PARAM_LENGTH = 16 * 1024;

/**
 * A path segment whose percent-escapes do not decode (`%`, `%zz`, `%ED%A0%80`) is taken as
 * literal text, so the request is routed, authenticated and validated like any other: a
 * malformed id is a 400 with its path, after the 401 of a missing key, in the one envelope.
 */
export function literalBadEscapes(url: string): string {
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  if (!path.includes('%')) return url;
  const fixed = path
    .split('/')
    .map((segment) => {
      if (!segment.includes('%')) return segment;
      try {
        decodeURIComponent(segment);
        return segment;
      } catch {
        return segment.replaceAll('%', '%25');
      }
    })
    .join('/');
  return query === -1 ? fixed : fixed + url.slice(query);
}

/**
 * What the app serves: `full` is the api role; `operations` is only /healthz, /readyz and
 * /metrics, for processes without the api role (a scheduler or a worker must still be
 * observable and probe-able).
 */
export type AppSurface = 'full' | 'operations';

/** Builds the HTTP application. Listening is the caller's business. */
export async function buildApp(deps: Deps, surface: AppSurface = 'full'): Promise<App> {
  const app = Fastify({
    loggerInstance: deps.log,
    // One line per request is written by the observability hook instead.
    logController: new LogController({ disableRequestLogging: true }),
    // request.log is made when a request first logs (http/request-logger.ts).
    childLoggerFactory: lazyRequestLogger,
    genReqId: (req) => requestId(req.headers['x-request-id']),
    bodyLimit: BODY_LIMIT_BYTES,
    // Answers are written from schemas whose nullable scalars are type lists (plugins/serialization.ts).
    schemaController: { compilersFactory: { buildSerializer } },
    ...serverBounds(deps.config.http),
    // X-Forwarded-For is believed for exactly the configured number of proxy hops.
    trustProxy: (_address: string, hop: number) => hop < deps.config.trustProxyHops,
    // Only idle keep-alive sockets are closed on shutdown; in-flight requests finish.
    forceCloseConnections: 'idle',
    // Requests arriving during shutdown are answered by our own hook, in the envelope.
    return503OnClosing: false,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    rewriteUrl: (req) => literalBadEscapes(req.url ?? '/'),
    // What the router itself refuses (an undecodable URL, an over-long parameter) answers in the
    // envelope too; no hook has run, so the request id is set here.
    frameworkErrors: (err, request, reply) => {
      reply.header('x-request-id', request.id);
      return sendError(reply, toAppError(err));
    },
  }).withTypeProvider() as unknown as App;

  // Every route the server serves, as registered; the OpenAPI document must list them all.
  const routes: { method: string; url: string }[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });
  app.decorate('registeredRoutes', routes);

  // While shutting down, in-flight responses close their connection: a keep-alive socket
  // would otherwise hold the exit until the client gives it up.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // Hooks that run on every request and never wait take a callback, not a promise: an async
  // hook costs every request a promise and a turn of the microtask queue.
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    reply.header('connection', 'close');
    done(errors.unavailable('The service is shutting down; retry on another instance'));
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
  // Bodies are JSON only: without this, text/plain would be parsed as a string (a 400), not refused (415).
  app.removeContentTypeParser('text/plain');
  installJsonParser(app);
  capConnections(app, deps.config.http);

  installValidators(app);
  installErrorHandling(app);
  installObservability(app, deps);
  installSecurityHeaders(app);
  installCompression(app);
  // The API's routes, the OpenAPI document, the MCP server and the dashboard (with what they
  // import: the Stripe SDK, swagger, markdown, the schemas and TypeBox) are loaded only by a
  // process that serves them: a scheduler or worker process never loads that code, and its
  // memory stays that much smaller (docs/architecture.md, "Lazy roles"). Its routes have no
  // schema, so nothing refers to the envelope's.
  const api = surface === 'full' ? await import('./api-surface.ts') : undefined;
  if (api) {
    app.addSchema(api.ErrorEnvelope);
    await api.installOpenApi(app, deps.config.publicUrl);
  }

  // Each level of authentication is a scope around its routes (plugins/auth.ts): a route is
  // guarded by where it is registered. Which scope a route belongs to is checked by
  // test/route-guards.test.ts against every registered route.
  // The operations surface keeps the two guarded areas, empty: their paths answer as on an api
  // process without a route (401 without credentials, then 404).
  // One rate counter for the API-key scope and the public description under /api/svc.
  const authenticator = new Authenticator(deps);
  const mount = (modules: readonly ((scope: App, deps: Deps) => void)[] | undefined) => (scope: App) => {
    for (const routes of modules ?? []) routes(scope, deps);
  };
  await app.register(
    publicScope(async (scope) => {
      healthRoutes(scope, deps, api?.healthSchemas);
      if (!api) return;
      await api.installOpenApiRoutes(scope, authenticator);
      api.stripeWebhookRoutes(scope, deps);
      api.connectorCallbackRoutes(scope, deps);
    }),
  );
  await app.register(adminScope(deps, mount(api?.adminRouteModules)), { prefix: '/api/admin' });
  await app.register(apiKeyScope(deps, mount(api?.apiKeyRouteModules), authenticator), {
    prefix: '/api/svc',
  });
  if (!api) {
    await app.ready();
    return app;
  }
  // The dashboard's own scopes (public pages and signed-in pages) are in web/plugin.ts.
  await app.register(api.dashboard(deps));
  return app;
}
