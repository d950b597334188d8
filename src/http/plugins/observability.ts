import { randomUUID } from 'node:crypto';
import type { Deps } from '../../domain/deps.ts';
import { infoLineWriter } from '../../lib/logger.ts';
import type { App } from '../types.ts';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A caller's X-Request-Id is kept when it is a plain token; otherwise a new one is made. */
export function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && SAFE_REQUEST_ID.test(header) ? header : randomUUID();
}

/**
 * One log line and two metrics per request. The route label is the route's template
 * (`/api/svc/tasks/:taskId`), never the raw URL, so label cardinality stays bounded.
 *
 * The access line's fields are these six and the request id, none of them a credential (the
 * path is written without its query string, and no header is), so it is written without the
 * redaction pass and without pino's generic formatting (see infoLineWriter). Measured in the
 * server, with the two metrics kept as plain numbers (lib/request-metrics.ts) and standard
 * output written once per turn of the event loop: a `GET /tasks/{id}` went from 237.6 to 210.6
 * µs of the process's CPU (docs/benchmarks.md). Every other line, the request's own included,
 * keeps redaction.
 */
export function installObservability(app: App, deps: Deps): void {
  const writeLine = infoLineWriter(deps.log);
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? '(unmatched)';
    const ms = reply.elapsedTime;
    deps.metrics.http.record(request.method, route, reply.statusCode, ms / 1000);
    const query = request.url.indexOf('?');
    const path = query < 0 ? request.url : request.url.slice(0, query);
    const org = request.principal?.organizationId;
    // request.id is a plain token or a uuid (requestId below), the method a token of the HTTP
    // parser's, the organization a uuid: only the route and the path need escaping.
    writeLine(
      `"reqId":"${request.id}","method":"${request.method}","route":${JSON.stringify(route)},"url":${JSON.stringify(path)},"status":${reply.statusCode},"ms":${Math.round(ms * 10) / 10}${org === undefined ? '' : `,"org":"${org}"`}`,
      'request',
    );
    done();
  });
}
