// The schemas of /healthz, /readyz and /metrics: their answers for the OpenAPI document and the
// serializer. Only the api role's surface uses them (http/api-surface.ts): a scheduler or worker
// process serves the same three routes without schemas, so that it does not load TypeBox for
// them (docs/architecture.md, "Lazy roles"); the answers are the same JSON or text either way.
import { Type } from 'typebox';
import { errorResponses } from '../../schemas/common.ts';

export const healthSchemas = {
  healthz: {
    operationId: 'checkHealth',
    description: 'Answers 200 while the process runs; it does not touch the database. For liveness probes.',
    tags: ['operations'],
    summary: 'The process is up',
    security: [],
    response: { 200: Type.Object({ status: Type.Literal('ok') }) },
  },
  readyz: {
    operationId: 'checkReadiness',
    description:
      'Answers 200 when the database answers a query within 2 seconds, else 503. For readiness probes and load balancers.',
    tags: ['operations'],
    summary: 'The database answers',
    security: [],
    response: { 200: Type.Object({ status: Type.Literal('ready') }), ...errorResponses(503) },
  },
  metrics: {
    operationId: 'getMetrics',
    description:
      'Request counts and durations, run and delivery counters and queue gauges in the Prometheus text exposition format. No API key: keep it off the public network.',
    tags: ['operations'],
    summary: 'Prometheus metrics (text exposition format)',
    security: [],
    produces: ['text/plain'],
    response: { 200: Type.String() },
  },
};

export type HealthSchemas = typeof healthSchemas;
