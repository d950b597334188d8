import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import { errors } from '../../lib/errors.ts';
import { errorResponses } from '../../schemas/common.ts';
import type { App } from '../types.ts';

const READY_TIMEOUT_MS = 2000;

export function healthRoutes(app: App, deps: Deps): void {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'checkHealth',
        description:
          'Answers 200 while the process runs; it does not touch the database. For liveness probes.',
        tags: ['operations'],
        summary: 'The process is up',
        security: [],
        response: { 200: Type.Object({ status: Type.Literal('ok') }) },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'checkReadiness',
        description:
          'Answers 200 when the database answers a query within 2 seconds, else 503. For readiness probes and load balancers.',
        tags: ['operations'],
        summary: 'The database answers',
        security: [],
        response: { 200: Type.Object({ status: Type.Literal('ready') }), ...errorResponses(503) },
      },
    },
    async () => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), READY_TIMEOUT_MS);
      });
      try {
        await Promise.race([deps.db.query('SELECT 1'), timeout]);
      } catch {
        throw errors.unavailable('The database is not reachable');
      } finally {
        clearTimeout(timer);
      }
      return { status: 'ready' as const };
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'getMetrics',
        description:
          'Request counts and durations, run and delivery counters and queue gauges in the Prometheus text exposition format. No API key: keep it off the public network.',
        tags: ['operations'],
        summary: 'Prometheus metrics (text exposition format)',
        security: [],
        produces: ['text/plain'],
        response: { 200: Type.String() },
      },
    },
    async (_request, reply) => {
      reply.type(deps.metrics.registry.contentType);
      return deps.metrics.registry.metrics();
    },
  );
}
