import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import OpenAI from 'openai';
import { type Config, loadConfig } from '../../src/config.ts';
import type { App } from '../../src/http/types.ts';
import type { Clock } from '../../src/lib/clock.ts';
import { createLogger } from '../../src/lib/logger.ts';
import type { RunExecutor } from '../../src/runner/executor.ts';
import { type Service, startService } from '../../src/service.ts';
import { createTestDb, type TestDb } from './db.ts';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

/**
 * The model SDK waits 0.5 s, 1 s, 2 s, 4 s before its retries (a run that exhausts them spends
 * about 7.5 s asleep); a service in the test process waits 10 ms instead. What is retried, how
 * often, and a Retry-After the provider sends stay the SDK's own. The SDK has no option for its
 * backoff, so its prototype method is replaced here, in tests only; services started as
 * processes keep the real backoff.
 */
const TEST_MODEL_RETRY_DELAY_MS = 10;
const sdk = OpenAI.prototype as unknown as Record<string, unknown>;
if (typeof sdk.calculateDefaultRetryTimeoutMillis !== 'function') {
  throw new Error(
    'the openai SDK no longer has calculateDefaultRetryTimeoutMillis: shorten its backoff anew',
  );
}
sdk.calculateDefaultRetryTimeoutMillis = () => TEST_MODEL_RETRY_DELAY_MS;

export interface TestService {
  service: Service;
  app: App;
  config: Config;
  testDb: TestDb;
  /** Every log line the service wrote, raw JSON. */
  logs: string[];
  /** An HTTP request through the app (no socket), JSON body parsed. */
  call(options: CallOptions): Promise<Reply>;
  /** An organization made through the admin API. */
  createOrg(
    plan?: 'free' | 'paid',
  ): Promise<{ organizationId: string; apiKey: string; webhookSecret: string }>;
  close(): Promise<void>;
}

export interface CallOptions {
  method: InjectOptions['method'];
  url: string;
  /** An API key: sent as `Authorization: Bearer <key>`. */
  key?: string;
  admin?: boolean;
  body?: unknown;
  headers?: Record<string, string>;
  remoteAddress?: string;
}

export interface Reply {
  status: number;
  headers: LightMyRequestResponse['headers'];
  body: any;
  raw: string;
}

export function testEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    SVC_DATA_DIR: 'memory://',
    SVC_CREATE_DEMO_ORG: 'false',
    SVC_ADMIN_TOKEN: ADMIN_TOKEN,
    SVC_SECRET_KEY: randomBytes(32).toString('base64'),
    SVC_LOG_LEVEL: 'info',
    PORT: '0',
    // Run retention is tested by calling it (run-retention.test.ts): a suite whose clock is
    // years ahead must not lose the runs it wrote to a housekeeping pass a minute in.
    SVC_RUN_RETENTION_DAYS: '0',
    ...extra,
  };
}

export async function startTestService(
  options: {
    env?: Record<string, string>;
    clock?: Clock;
    listen?: boolean;
    /** Run the scheduler and worker loops (default false: runs stay pending unless a test drives them). */
    startLoops?: boolean;
    executor?: RunExecutor;
  } = {},
): Promise<TestService> {
  const testDb = await createTestDb();
  const config = loadConfig(testEnv({ ...(testDb.url && { DATABASE_URL: testDb.url }), ...options.env }));
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs.push(String(chunk));
      done();
    },
  });
  // A start that fails (a test of a bad configuration) still drops its database.
  const service = await startService(config, {
    db: testDb.db,
    log: createLogger(config.logLevel, sink),
    listen: options.listen ?? false,
    startLoops: options.startLoops ?? false,
    ...(options.clock && { clock: options.clock }),
    ...(options.executor && { executor: options.executor }),
  }).catch(async (err: unknown) => {
    await testDb.dispose();
    throw err;
  });
  const app = service.app;
  if (!app) throw new Error('test service has no api role');

  const call = async (o: CallOptions): Promise<Reply> => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.key !== undefined) headers.authorization = `Bearer ${o.key}`;
    if (o.admin) headers.authorization = `Bearer ${ADMIN_TOKEN}`;
    const res = await app.inject({
      method: o.method,
      url: o.url,
      headers,
      ...(o.remoteAddress && { remoteAddress: o.remoteAddress }),
      ...(o.body !== undefined && { payload: typeof o.body === 'string' ? o.body : JSON.stringify(o.body) }),
      ...(o.body !== undefined && typeof o.body !== 'string' && !headers['content-type']
        ? { headers: { ...headers, 'content-type': 'application/json' } }
        : {}),
    });
    let body: unknown;
    try {
      body = res.body ? JSON.parse(res.body) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.statusCode, headers: res.headers, body, raw: res.body };
  };

  return {
    service,
    app,
    config,
    testDb,
    logs,
    call,
    async createOrg(plan = 'free') {
      const res = await call({
        method: 'POST',
        url: '/api/admin/organizations',
        admin: true,
        body: { name: `Org ${randomBytes(3).toString('hex')}`, plan },
      });
      if (res.status !== 201) throw new Error(`createOrg: ${res.status} ${res.raw}`);
      return res.body;
    },
    async close() {
      // The database is dropped even when the stop fails (a test closed the connection itself).
      try {
        await service.stop();
      } finally {
        await testDb.dispose();
      }
    },
  };
}
