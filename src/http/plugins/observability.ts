import { randomUUID } from 'node:crypto';
import type { Deps } from '../../domain/deps.ts';
import type { App } from '../types.ts';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A caller's X-Request-Id is kept when it is a plain token; otherwise a new one is made. */
export function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && SAFE_REQUEST_ID.test(header) ? header : randomUUID();
}

/**
 * One log line and two metrics per request. The route label is the route's template
 * (`/api/svc/tasks/:taskId`), never the raw URL, so label cardinality stays bounded.
 */
export function installObservability(app: App, deps: Deps): void {
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? '(unmatched)';
    const status = String(reply.statusCode);
    deps.metrics.httpRequests.inc({ method: request.method, route, status });
    deps.metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    request.log.info(
      {
        method: request.method,
        route,
        url: request.url.split('?')[0],
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        org: request.principal?.organizationId,
      },
      'request',
    );
    done();
  });
}
