import type { StripeClient } from '../billing/stripe-client.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/db.ts';
import type { Clock } from '../lib/clock.ts';
import type { LocalSignals } from '../lib/local-signals.ts';
import type { Logger } from '../lib/logger.ts';
import type { Metrics } from '../lib/metrics.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import type { ModelCatalog } from './models.ts';
import type { SourceTestSlots } from './org-caps.ts';
import type { PrincipalCache } from './principal-cache.ts';
import type { RunHandoff } from './run-handoff.ts';
import type { TaskCreateBatcher } from './task-create-batcher.ts';

/** What domain services need from the outside world; built once at boot and passed down. */
export interface Deps {
  config: Config;
  db: Db;
  clock: Clock;
  secretBox: SecretBox;
  log: Logger;
  metrics: Metrics;
  /** The AI model catalog (shipped, or SVC_MODELS_FILE), loaded and validated at boot. */
  models: ModelCatalog;
  /** The Stripe client; undefined when STRIPE_SECRET_KEY is not set. */
  stripe: StripeClient | undefined;
  /** API keys and their organizations' limits, cached per process (see PrincipalCache). */
  principals: PrincipalCache;
  /** Task creates, several per statement under load (see TaskCreateBatcher). */
  taskCreates: TaskCreateBatcher;
  /** Source connection tests running in this process, per organization (config.orgCaps.sourceTests). */
  sourceTests: SourceTestSlots;
  /** Wake-ups of this process's own loops by work it made (see LocalSignals). */
  signals: LocalSignals;
  /** Run now's hand-over of its run to this process's worker (see RunHandoff). */
  runHandoff: RunHandoff;
}
