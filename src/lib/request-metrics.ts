// The two per-request metrics (svc_http_requests_total and svc_http_request_duration_seconds),
// kept as plain numbers and handed to the Prometheus registry only when it is scraped.
//
// Why not prom-client's Counter and Histogram: each of their calls validates its labels and
// builds a key from them (sorted label names, joined strings) before it adds one, which is cheap
// in a loop but, measured in the server, cost a read about as much as its access-log line did.
// Here a request is two Map lookups on its route template and method (strings the router and the
// HTTP parser hand over as the same objects every time) and a few additions. The scrape builds
// the series in the registry's JSON form (what `registry.getMetricsAsJSON()` gives for a counter
// and a histogram), which the registry writes as the text format like its own metrics.
import type { Metric, Registry } from 'prom-client';

/** Upper bounds of the duration buckets, in seconds (the `le` label). */
export const HTTP_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface RouteSeries {
  /** Requests per status code. */
  statuses: Map<number, number>;
  /** Requests per bucket, not cumulative; the last one is above every bound (+Inf). */
  buckets: Float64Array;
  sum: number;
  count: number;
}

/** One series as the registry reads it. */
interface SeriesValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** A metric in the form the registry writes out: what prom-client's own metrics return from get(). */
interface ScrapedMetric {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; values: SeriesValue[]; aggregator: 'sum' }>;
  reset(): void;
}

export class RequestMetrics {
  /**
   * Route template, then method. Bounded: templates are the registered routes and
   * `(unmatched)`, methods those Node's HTTP parser accepts, statuses three digits.
   */
  readonly #routes = new Map<string, Map<string, RouteSeries>>();

  /** One answered request. */
  record(method: string, route: string, status: number, seconds: number): void {
    let methods = this.#routes.get(route);
    if (!methods) {
      methods = new Map();
      this.#routes.set(route, methods);
    }
    let series = methods.get(method);
    if (!series) {
      series = {
        statuses: new Map(),
        buckets: new Float64Array(HTTP_DURATION_BUCKETS.length + 1),
        sum: 0,
        count: 0,
      };
      methods.set(method, series);
    }
    series.statuses.set(status, (series.statuses.get(status) ?? 0) + 1);
    let bucket = 0;
    while (bucket < HTTP_DURATION_BUCKETS.length && seconds > (HTTP_DURATION_BUCKETS[bucket] as number))
      bucket++;
    series.buckets[bucket] = (series.buckets[bucket] as number) + 1;
    series.sum += seconds;
    series.count += 1;
  }

  /** Registers both metrics with `registry`. */
  register(registry: Registry): void {
    // The registry takes any object of this form (it reads name, help, type and get()); its
    // type asks for its own Metric class.
    for (const metric of [this.#requestsMetric(), this.#durationMetric()]) {
      registry.registerMetric(metric as unknown as Metric);
    }
  }

  *#series(): Generator<[route: string, method: string, series: RouteSeries]> {
    for (const [route, methods] of this.#routes) {
      for (const [method, series] of methods) yield [route, method, series];
    }
  }

  #scraped(
    name: string,
    help: string,
    type: ScrapedMetric['type'],
    values: () => SeriesValue[],
  ): ScrapedMetric {
    return {
      name,
      help,
      type,
      aggregator: 'sum',
      get: async () => ({ name, help, type, values: values(), aggregator: 'sum' }),
      reset: () => this.#routes.clear(),
    };
  }

  #requestsMetric(): ScrapedMetric {
    return this.#scraped(
      'svc_http_requests_total',
      'HTTP requests answered, by method, route template and status',
      'counter',
      () => {
        const values: SeriesValue[] = [];
        for (const [route, method, series] of this.#series()) {
          for (const [status, count] of series.statuses) {
            values.push({ labels: { method, route, status: String(status) }, value: count });
          }
        }
        return values;
      },
    );
  }

  #durationMetric(): ScrapedMetric {
    const name = 'svc_http_request_duration_seconds';
    return this.#scraped(
      name,
      'Time from request received to response sent, by method and route template',
      'histogram',
      () => {
        const values: SeriesValue[] = [];
        for (const [route, method, series] of this.#series()) {
          let cumulative = 0;
          HTTP_DURATION_BUCKETS.forEach((le, i) => {
            cumulative += series.buckets[i] as number;
            values.push({ labels: { le, method, route }, value: cumulative, metricName: `${name}_bucket` });
          });
          values.push(
            { labels: { le: '+Inf', method, route }, value: series.count, metricName: `${name}_bucket` },
            { labels: { method, route }, value: series.sum, metricName: `${name}_sum` },
            { labels: { method, route }, value: series.count, metricName: `${name}_count` },
          );
        }
        return values;
      },
    );
  }
}
