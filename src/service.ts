import { createStripeClient } from './billing/stripe-client.ts';
import type { UsageReporter } from './billing/usage-meter.ts';
import type { Config } from './config.ts';
import type { Db } from './db/db.ts';
import { migrate } from './db/migrate.ts';
import { openDb } from './db/open.ts';
import { pruneIdempotencyKeys } from './db/sql/idempotency-keys.ts';
import { findOrganization } from './db/sql/organizations.ts';
import { pruneRateLimitCounters } from './db/sql/rate-limits.ts';
import { databaseClock } from './db/sql/time.ts';
import { pruneExpiredSessionsAndInvitations } from './db/sql/users.ts';
import type { DeliveryDispatcher } from './delivery/dispatcher.ts';
import type { Deps } from './domain/deps.ts';
import { IDEMPOTENCY_RETENTION_MS } from './domain/idempotency.ts';
import { loadModelCatalog, type ModelCatalog } from './domain/models.ts';
import { SourceTestSlots } from './domain/org-caps.ts';
import { createDemoOrganizationIfEmpty, openWebhookSecret } from './domain/organizations.ts';
import { PrincipalCache } from './domain/principal-cache.ts';
import { windowStart } from './domain/rate-limit.ts';
import { RunHandoff } from './domain/run-handoff.ts';
import { pruneExpiredRuns } from './domain/run-retention.ts';
import { resolveSecretKey, verifySecretKey } from './domain/secret-key.ts';
import { TaskCreateBatcher } from './domain/task-create-batcher.ts';
import { buildApp } from './http/app.ts';
import type { App } from './http/types.ts';
import { type BackgroundPart, BackgroundRegistry } from './lib/background.ts';
import type { Clock } from './lib/clock.ts';
import { LocalSignals } from './lib/local-signals.ts';
import { createLogger, type Logger } from './lib/logger.ts';
import { Loop } from './lib/loop.ts';
import { createMetrics } from './lib/metrics.ts';
import { SecretBox } from './lib/secret-box.ts';
import type { RunExecutor } from './runner/executor.ts';
import type { DueTaskClaimer } from './scheduler/claimer.ts';
import type { RunWorker } from './worker/worker.ts';

export interface DemoOrganization {
  organizationId: string;
  apiKey: string;
}

export interface Service {
  deps: Deps;
  /** The HTTP app: the whole API with the api role, else only /healthz, /readyz and /metrics. */
  app: App | undefined;
  /** The bound address, e.g. http://127.0.0.1:8787, when listening. */
  url: string | undefined;
  /** Set when this start created the demo organization. */
  demo: DemoOrganization | undefined;
  /** The due-task claimer when the scheduler role runs here. */
  scheduler: DueTaskClaimer | undefined;
  /** The run worker when the worker role runs here. */
  worker: RunWorker | undefined;
  /** The delivery dispatcher, with the worker role. */
  dispatcher: DeliveryDispatcher | undefined;
  /** Sends metered usage to Stripe, with the worker role when Stripe is configured. */
  usageReporter: UsageReporter | undefined;
  /** Stops taking work, lets in-flight requests finish, closes the database. */
  stop(): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  log?: Logger;
  /** Listen on config.host:config.port (default true). Tests may use app.inject instead. */
  listen?: boolean;
  /** An already opened database (tests); it is closed by stop(). */
  db?: Db;
  /** What executes runs (default: the model executor). */
  executor?: RunExecutor;
  /**
   * Start the scheduler and worker loops of the roles this process has (default true). Tests
   * that drive them step by step (scheduler.tick()) pass false: the objects exist, idle.
   */
  startLoops?: boolean;
}

const MAINTENANCE_INTERVAL_MS = 60_000;

/** Housekeeping every MAINTENANCE_INTERVAL_MS (not at start); a failure waits for the next one. */
function maintenance(log: Logger, name: string, work: () => Promise<unknown>): Loop {
  return new Loop({
    name,
    pollMs: MAINTENANCE_INTERVAL_MS,
    passAtStart: false,
    pass: async () => {
      await work().catch((err: Error) => log.warn({ err: err.message }, `${name} failed`));
      return undefined;
    },
    log,
  });
}

/** Revocations and plan changes made by other processes empty this process's key cache. */
function principalListener(principals: PrincipalCache): BackgroundPart {
  let unlisten: (() => Promise<void>) | undefined;
  return {
    start: async () => {
      unlisten = await principals.listen();
    },
    stop: async () => {
      await unlisten?.();
    },
  };
}

/** Opens the database, migrates it, and starts the roles this process has. */
export async function startService(config: Config, options: StartOptions = {}): Promise<Service> {
  const log = options.log ?? createLogger(config.logLevel);
  const clock = options.clock ?? databaseClock;
  // A bad catalog file fails startup before any database work.
  let models: ModelCatalog;
  try {
    models = loadModelCatalog(config.modelsFile);
  } catch (err) {
    await options.db?.close().catch(() => undefined);
    throw err;
  }
  const db =
    options.db ?? (await openDb(config, (err) => log.warn({ err: err.message }, 'database connection lost')));
  // Every background part of this process, started and stopped in one place.
  const background = new BackgroundRegistry();
  let app: App | undefined;
  try {
    const applied = await migrate(db);
    if (applied.length) log.info({ applied }, 'migrations applied');
    const secretBox = new SecretBox(resolveSecretKey(config));
    await verifySecretKey(db, secretBox);
    const deps: Deps = {
      config,
      db,
      clock,
      secretBox,
      log,
      metrics: createMetrics(),
      models,
      stripe: await createStripeClient(config.stripe),
      principals: new PrincipalCache(db),
      taskCreates: new TaskCreateBatcher(db, config.orgCaps),
      sourceTests: new SourceTestSlots(config.orgCaps.sourceTests),
      signals: new LocalSignals(),
      runHandoff: new RunHandoff(),
    };

    // Each role's code is imported only by a process that has the role (docs/architecture.md,
    // "Lazy roles"): the model client and the tools stay out of an api or scheduler process.
    let scheduler: DueTaskClaimer | undefined;
    if (config.roles.has('scheduler')) {
      const { DueTaskClaimer } = await import('./scheduler/claimer.ts');
      scheduler = new DueTaskClaimer(deps);
    }
    let worker: RunWorker | undefined;
    let dispatcher: DeliveryDispatcher | undefined;
    let usageReporter: UsageReporter | undefined;
    if (config.roles.has('worker')) {
      const [{ RunWorker }, { DeliveryDispatcher }, { createChannels }, { UsageReporter }] =
        await Promise.all([
          import('./worker/worker.ts'),
          import('./delivery/dispatcher.ts'),
          import('./delivery/channels/index.ts'),
          import('./billing/usage-meter.ts'),
        ]);
      const executor = options.executor ?? (await import('./runner/model-executor.ts')).modelExecutor(deps);
      worker = new RunWorker(deps, executor);
      dispatcher = new DeliveryDispatcher(
        deps,
        createChannels({
          config,
          secretOf: async (organizationId) => {
            const org = await findOrganization(db, organizationId);
            if (!org) throw new Error(`organization ${organizationId} not found`);
            return openWebhookSecret(deps, org);
          },
        }),
      );
      if (deps.stripe) usageReporter = new UsageReporter(deps);
    }
    // Stopped first: the scheduler creates work; then, while requests drain, the parts that
    // finish work in flight (with the grace period); the key cache's listener last.
    if (scheduler) background.add('scheduler', scheduler, { stage: 'producer' });
    if (worker) background.add('run worker', worker, { stage: 'consumer' });
    if (dispatcher) background.add('delivery dispatcher', dispatcher, { stage: 'consumer' });
    if (usageReporter) background.add('usage reporter', usageReporter, { stage: 'consumer' });
    await background.start({ loops: options.startLoops !== false });
    let url: string | undefined;
    // Every process serves HTTP: the api role the whole surface, the others /healthz, /readyz
    // and /metrics only.
    // Revocations and plan changes made by other processes empty this process's key cache.
    if (config.roles.has('api')) {
      background.add('principal cache listener', principalListener(deps.principals), {
        stage: 'listener',
        always: true,
      });
      await background.start({ loops: options.startLoops !== false });
    }
    app = await buildApp(deps, config.roles.has('api') ? 'full' : 'operations');
    if (options.listen !== false) url = await app.listen({ host: config.host, port: config.port });
    else await app.ready();
    // Only once the port is ours: a start that fails before this point (port in use) has
    // written no demo organization, so the next start still creates one and shows its key.
    // Nothing that can fail comes between this and the banner (run-server.ts).
    const created = config.createDemoOrg ? await createDemoOrganizationIfEmpty(deps) : undefined;
    const demo = created?.apiKey
      ? { organizationId: created.organization.id, apiKey: created.apiKey }
      : undefined;
    if (config.roles.has('api')) {
      const retentionDays = config.worker.runRetentionDays;
      const pruneRuns = async () => {
        const runs = await pruneExpiredRuns(db, clock.statementNow(), retentionDays);
        if (runs > 0) log.info({ runs, retentionDays }, 'ended runs past their retention deleted');
      };
      const housekeeping: (readonly [string, () => Promise<unknown>])[] = [
        ['rate-limit counter pruning', () => pruneRateLimitCounters(db, windowStart(clock.now()))],
        ['session and invitation pruning', () => pruneExpiredSessionsAndInvitations(db, clock.now())],
        [
          'idempotency key pruning',
          () => pruneIdempotencyKeys(db, clock.statementNow(), IDEMPOTENCY_RETENTION_MS),
        ],
        // SVC_RUN_RETENTION_DAYS=0 keeps every run: no pass at all.
        ...(retentionDays > 0 ? [['run pruning', pruneRuns] as const] : []),
      ];
      for (const [name, work] of housekeeping) {
        background.add(name, maintenance(log, name, work), { stage: 'producer', always: true });
      }
      await background.start({ loops: options.startLoops !== false });
    }

    let stopping: Promise<void> | undefined;
    const stop = () => {
      stopping ??= (async () => {
        // Stop creating work first, then let requests and runs in flight finish (runs still
        // going when the grace period ends go back to the queue), then close the database.
        await background.stop(config.shutdownGraceMs, () => app?.close() ?? Promise.resolve());
        await db.close();
      })();
      return stopping;
    };
    return { deps, app, url, demo, scheduler, worker, dispatcher, usageReporter, stop };
  } catch (err) {
    await background.stop(0).catch(() => undefined);
    await app?.close().catch(() => undefined);
    await db.close().catch(() => undefined);
    throw err;
  }
}
