import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { HTTP_DURATION_BUCKETS, RequestMetrics } from '../src/lib/request-metrics.ts';

function exposition(record: (m: RequestMetrics) => void): Promise<string> {
  const registry = new Registry();
  const metrics = new RequestMetrics();
  metrics.register(registry);
  record(metrics);
  return registry.metrics();
}

describe('per-request metrics', () => {
  test('requests are counted per method, route template and status', async () => {
    const text = await exposition((m) => {
      m.record('GET', '/api/svc/tasks/:taskId', 200, 0.002);
      m.record('GET', '/api/svc/tasks/:taskId', 200, 0.003);
      m.record('GET', '/api/svc/tasks/:taskId', 404, 0.001);
      m.record('POST', '/api/svc/tasks', 201, 0.02);
    });
    assert.match(text, /^# TYPE svc_http_requests_total counter$/m);
    assert.match(
      text,
      /^svc_http_requests_total\{method="GET",route="\/api\/svc\/tasks\/:taskId",status="200"\} 2$/m,
    );
    assert.match(
      text,
      /^svc_http_requests_total\{method="GET",route="\/api\/svc\/tasks\/:taskId",status="404"\} 1$/m,
    );
    assert.match(
      text,
      /^svc_http_requests_total\{method="POST",route="\/api\/svc\/tasks",status="201"\} 1$/m,
    );
  });

  test('durations fill cumulative buckets, with the sum and count per method and route', async () => {
    const text = await exposition((m) => {
      // On a bound counts in that bucket (le is "less than or equal").
      for (const seconds of [0.0005, 0.001, 0.004, 0.2, 30]) m.record('GET', '/x', 200, seconds);
      m.record('GET', '/x', 500, 0.004);
    });
    const bucket = (le: string) => {
      const m = new RegExp(
        `^svc_http_request_duration_seconds_bucket\\{le="${le.replace('+', '\\+')}",method="GET",route="/x"\\} (\\S+)$`,
        'm',
      ).exec(text);
      assert.ok(m, `bucket le=${le}`);
      return Number(m[1]);
    };
    assert.equal(bucket('0.001'), 2);
    assert.equal(bucket('0.0025'), 2);
    assert.equal(bucket('0.005'), 4);
    assert.equal(bucket('0.25'), 5);
    assert.equal(bucket('10'), 5);
    assert.equal(bucket('+Inf'), 6);
    assert.equal(
      text.match(/^svc_http_request_duration_seconds_bucket\{/gm)?.length,
      HTTP_DURATION_BUCKETS.length + 1,
    );
    const sum = /^svc_http_request_duration_seconds_sum\{method="GET",route="\/x"\} (\S+)$/m.exec(text);
    assert.ok(sum);
    assert.ok(Math.abs(Number(sum[1]) - (0.0005 + 0.001 + 0.004 + 0.2 + 30 + 0.004)) < 1e-9);
    assert.match(text, /^svc_http_request_duration_seconds_count\{method="GET",route="\/x"\} 6$/m);
    assert.match(text, /^# TYPE svc_http_request_duration_seconds histogram$/m);
  });

  test('a registry reset starts the counts again', async () => {
    const registry = new Registry();
    const metrics = new RequestMetrics();
    metrics.register(registry);
    metrics.record('GET', '/x', 200, 0.01);
    registry.resetMetrics();
    metrics.record('GET', '/x', 200, 0.01);
    assert.match(
      await registry.metrics(),
      /^svc_http_requests_total\{method="GET",route="\/x",status="200"\} 1$/m,
    );
  });
});
