import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

/**
 * The service's Prometheus metrics, one registry per service instance (so tests that start
 * several instances in one process do not share counters). Scraped at GET /metrics.
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'svc_' });
  return {
    registry,
    httpRequests: new Counter({
      name: 'svc_http_requests_total',
      help: 'HTTP requests answered, by method, route template and status',
      labelNames: ['method', 'route', 'status'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'Time from request received to response sent, by method and route template',
      labelNames: ['method', 'route'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
