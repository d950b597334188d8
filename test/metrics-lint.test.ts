import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { startTestService, type TestService } from './helpers/service.ts';

// /metrics is scraped by Prometheus and read by the usual Node.js dashboards: it must pass
// Prometheus's own lint (`promtool check metrics`, from Debian's `prometheus` package; .ci/run
// installs it) and keep the names those dashboards query.

/** promtool's path, or undefined when it is not installed. */
function promtool(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

describe('the /metrics exposition', () => {
  let svc: TestService;
  let exposition: string;
  before(async () => {
    svc = await startTestService();
    const org = await svc.createOrg();
    // A request answered 200 and one answered 401, so that the labelled series have samples.
    await svc.call({
      method: 'GET',
      url: `/api/svc/billing/status?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    await svc.call({ method: 'GET', url: `/api/svc/billing/status?organizationId=${org.organizationId}` });
    const res = await svc.call({ method: 'GET', url: '/metrics' });
    assert.equal(res.status, 200);
    exposition = res.raw;
  });
  after(() => svc.close().catch(() => undefined));

  test('passes promtool check metrics', (t) => {
    const bin = promtool();
    if (!bin) {
      t.skip('promtool is not installed (apt-get install prometheus); .ci/run installs it');
      return;
    }
    const checked = spawnSync(bin, ['check', 'metrics'], { input: exposition, encoding: 'utf8' });
    assert.equal(checked.status, 0, `promtool check metrics: ${checked.stdout}${checked.stderr}`);
  });

  test('the runtime metrics keep the names Node.js dashboards query', () => {
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'nodejs_heap_size_total_bytes',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_active_handles',
      'nodejs_version_info',
      'nodejs_gc_duration_seconds',
    ])
      assert.match(exposition, new RegExp(`^# TYPE ${name} `, 'm'), `${name} is exported`);
    assert.doesNotMatch(exposition, /^# TYPE svc_(process|nodejs)_/m, 'no prefix on the runtime metrics');
  });

  test('only counters have names ending in _total (the rule promtool checks first)', () => {
    const misnamed = [...exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)]
      .filter((m) => m[1]?.endsWith('_total') && m[2] !== 'counter')
      .map((m) => `${m[1]} (${m[2]})`);
    assert.deepEqual(misnamed, []);
  });
});
