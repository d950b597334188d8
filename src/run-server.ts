import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Config } from './config.ts';
import { type DemoOrganization, type Service, startService } from './service.ts';

/** Beyond the grace period, time to give unfinished runs back and close the database. */
const SHUTDOWN_MARGIN_MS = 10_000;

function demoBanner(demo: DemoOrganization, baseUrl: string): string {
  return [
    '',
    'Created a demo organization (first start with an empty database).',
    `  organizationId: ${demo.organizationId}`,
    `  API key:        ${demo.apiKey}`,
    '  The key is shown this once; only its hash is stored.',
    '  Try:',
    `  curl -H "Authorization: Bearer ${demo.apiKey}" "${baseUrl}/api/svc/billing/status?organizationId=${demo.organizationId}"`,
    '',
  ].join('\n');
}

/**
 * One memory-reducing collection once the service has started. Start-up leaves garbage behind
 * (the modules' compilation, the migrations' text, the first requests' and loops' objects) in a
 * young generation grown to its largest and in old-generation pages V8 keeps; a process that
 * then idles, as a scheduler or worker mostly does, allocates too little for V8 to give them
 * back (measured: no change in 25 s). V8's last-resort collection compacts and returns them:
 * RSS of an idle worker 109 → 90 MB, all roles 190 → 122 MB (PostgreSQL, 2026-11-26). The
 * `gc` function comes from a context of its own, so nothing is added to the service's globals.
 */
function collectStartupGarbage(): void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (options: {
    type: 'major';
    execution: 'sync';
    flavor: 'last-resort';
  }) => void;
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/**
 * Runs the service until SIGTERM/SIGINT: then it stops accepting, lets in-flight work finish
 * (bounded by a grace period), closes the database and exits 0.
 */
export async function runServer(config: Config): Promise<void> {
  // The handlers are in place before the start: a signal that arrives while the service starts
  // (it listens before it has finished: the demo organization comes after) is acted on once it
  // has started, never by the default action, which would kill it without a shutdown.
  let service: Service | undefined;
  let signalled: string | undefined;
  let exiting = false;
  const onSignal = (signal: string) => {
    if (service) shutdown(service, signal);
    else signalled ??= signal;
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));

  service = await startService(config);
  // Printed, not logged: the key must reach the operator once and never a log store.
  if (service.demo) process.stdout.write(`${demoBanner(service.demo, service.url ?? config.publicUrl)}\n`);
  if (signalled) shutdown(service, signalled);
  else collectStartupGarbage();

  function shutdown(running: Service, signal: string) {
    if (exiting) return;
    exiting = true;
    running.deps.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      running.deps.log.error('shutdown grace period over; exiting');
      process.exit(1);
    }, config.shutdownGraceMs + SHUTDOWN_MARGIN_MS).unref();
    running.stop().then(
      () => {
        clearTimeout(force);
        process.exit(0);
      },
      (err: Error) => {
        running.deps.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  }
}
