import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { RequestMetrics } from './request-metrics.ts';

/**
 * prom-client's totals of active handles, requests and resources: gauges whose names end in
 * `_total`, which Prometheus keeps for counters (`promtool check metrics` refuses them). Each is
 * the sum of the per-type gauge of the same name without `_total`, which stays.
 */
const GAUGES_NAMED_AS_COUNTERS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/**
 * The service's Prometheus metrics, one registry per service instance (so tests that start
 * several instances in one process do not share counters). Scraped at GET /metrics.
 */
export function createMetrics() {
  const registry = new Registry();
  // The default metrics under their usual names (process_cpu_seconds_total, nodejs_heap_…),
  // which the common Node.js dashboards query.
  collectDefaultMetrics({ register: registry });
  for (const name of GAUGES_NAMED_AS_COUNTERS) registry.removeSingleMetric(name);
  const http = new RequestMetrics();
  http.register(registry);
  return {
    registry,
    /** svc_http_requests_total and svc_http_request_duration_seconds (see RequestMetrics). */
    http,
    schedulerSlots: new Counter({
      name: 'svc_scheduler_slots_total',
      help: "Schedule slots handled by this scheduler: run (a run was created), missed (older than the catch-up window, or superseded by a later missed slot), skipped_overlap (the previous run was still pending or running), skipped_budget (the task's cost in the billing period reached its monthly cost limit), skipped_run_limit (the organization had used its plan's runs for the billing period)",
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    dispatchLag: new Histogram({
      name: 'svc_scheduler_dispatch_lag_seconds',
      help: 'Time from a schedule slot to the commit of its run',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 15, 60, 300, 3600],
      registers: [registry],
    }),
    runsClaimed: new Counter({
      name: 'svc_worker_runs_claimed_total',
      help: 'Runs this worker took from the queue',
      registers: [registry],
    }),
    runsFinished: new Counter({
      name: 'svc_worker_runs_finished_total',
      help: 'Runs this worker finished, by final status',
      labelNames: ['status'] as const,
      registers: [registry],
    }),
    runsReleased: new Counter({
      name: 'svc_worker_runs_released_total',
      help: 'Runs this worker gave back to the queue unfinished (shutdown) or stopped (lease lost, canceled)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    leasesExpired: new Counter({
      name: 'svc_worker_leases_expired_total',
      help: 'Runs found with an expired lease (their worker died): retried or failed',
      labelNames: ['action'] as const,
      registers: [registry],
    }),
    runsInFlight: new Gauge({
      name: 'svc_worker_runs_in_flight',
      help: 'Runs this worker is executing now',
      registers: [registry],
    }),
    deliveryAttempts: new Counter({
      name: 'svc_delivery_attempts_total',
      help: 'Delivery attempts by channel and outcome (delivered, retry, failed)',
      labelNames: ['channel', 'outcome'] as const,
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
