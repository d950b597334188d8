/**
 * The configuration contract: every environment variable the service reads is described by one
 * TypeBox schema (src/config/schema.ts), parsed and validated against it once, at boot, and
 * shaped here into a typed object that is passed down. Nothing else reads process.env. A bad
 * value fails startup with one line naming the variable.
 */
import { readFileSync } from 'node:fs';
import { ConfigError, type RawEnv, readEnv } from './config/env.ts';
import type { CONNECTOR_PROVIDERS, LOG_LEVELS } from './config/schema.ts';
import { type OAuthClientCredentials, parseOAuthClients } from './lib/oauth-clients.ts';
import { parseStdioCommands, resolveStdioUser, type StdioUser } from './lib/stdio-config.ts';

export { ConfigError };

export const ROLES = ['api', 'scheduler', 'worker'] as const;
export type Role = (typeof ROLES)[number];

export interface Config {
  port: number;
  host: string;
  /** PostgreSQL server; undefined selects the embedded PGlite database. */
  databaseUrl: string | undefined;
  /** PGlite data directory (`memory://` keeps it in memory, for tests). */
  dataDir: string;
  /** Embedded database: each commit waits for the disk (fsync), so a power cut keeps it. */
  embeddedFsync: boolean;
  dbPoolSize: number;
  roles: ReadonlySet<Role>;
  adminToken: string | undefined;
  /** 32-byte key; undefined in embedded mode means "load or generate it in the data dir". */
  secretKey: Buffer | undefined;
  publicUrl: string;
  /** Whether SVC_PUBLIC_URL was set: only then do deliveries link to the run. */
  publicUrlSet: boolean;
  allowPrivateUrls: boolean;
  stdioCommands: readonly string[];
  /** Per command of stdioCommands, the config.env names its servers may be given (SVC_STDIO_COMMANDS). */
  stdioEnv: ReadonlyMap<string, ReadonlySet<string>>;
  /** The user stdio servers run as when the service runs as root (SVC_STDIO_USER, default nobody). */
  stdioUser: StdioUser | undefined;
  /**
   * The directories (the service's PATH) where a stdio source's command is looked up. The
   * spawned server itself never sees the service's PATH or any other variable of it.
   */
  stdioSearchPath: string;
  /** OAuth clients the operator registered, by provider name (SVC_OAUTH_CLIENTS). */
  oauthClients: ReadonlyMap<string, OAuthClientCredentials>;
  model: {
    baseUrl: string;
    apiKey: string | undefined;
    /** One model request is retried when its answer has not started after this long. */
    requestTimeoutMs: number;
    /** Model calls of one run (a tool loop's steps); a model still calling tools after them fails the run. */
    maxSteps: number;
    /** `max_tokens` of each model request; 0 sends none (for providers that refuse the parameter). */
    maxOutputTokens: number;
    /** Characters of one model answer (text and tool calls); a stream past them is stopped. */
    maxOutputChars: number;
  };
  smtp: { url: string | undefined; from: string | undefined };
  sms: {
    apiBase: string | undefined;
    accountSid: string | undefined;
    authToken: string | undefined;
    from: string | undefined;
  };
  /** The connector provider of `connector` sources; undefined when SVC_CONNECTOR_PROVIDER is unset. */
  connector: { provider: (typeof CONNECTOR_PROVIDERS)[number]; apiKey: string; apiBase: string } | undefined;
  stripe: {
    secretKey: string | undefined;
    webhookSecret: string | undefined;
    priceId: string | undefined;
    apiBase: string | undefined;
    /** The Stripe meter's event name that usage beyond the plan's credits is reported to. */
    meterEventName: string;
  };
  logLevel: (typeof LOG_LEVELS)[number];
  /** Trust X-Forwarded-For from this many proxy hops (0 = use the socket address). */
  trustProxyHops: number;
  /** Create a demo organization and print its key when the database has no organization. */
  createDemoOrg: boolean;
  /** Anyone may sign up (a new organization on the free plan and its owner) in the dashboard. */
  signupEnabled: boolean;
  /** An operator's model catalog (JSON) replacing the shipped one; undefined = the shipped catalog. */
  modelsFile: string | undefined;
  scheduler: {
    /** A missed slot older than this is skipped; the most recent one inside it gets one late run. */
    catchUpWindowMs: number;
  };
  worker: {
    /** Runs one worker process executes at once. */
    concurrency: number;
    /** Runs one organization may have running at once, across all workers. */
    orgConcurrency: number;
    /** The average execution under which a worker claims ahead of its free places; 0: never. */
    claimAheadBelowMs: number;
    /** How long a claimed run stays a worker's without a heartbeat. */
    leaseMs: number;
    /** Starts of one run (takeovers after a lost lease included) before it is failed. */
    maxAttempts: number;
    /** A run still executing after this is failed. */
    runTimeoutMs: number;
    /** Ended runs created more than this many days ago are deleted; 0: kept. */
    runRetentionDays: number;
  };
  delivery: {
    /** Delays before the retries of a failed delivery; its length is the number of retries. */
    retryScheduleMs: readonly number[];
    /** Deliveries one worker process sends at once. */
    concurrency: number;
    /** How long one attempt waits for the receiver (each SMTP step). */
    attemptTimeoutMs: number;
  };
  /** On SIGTERM, how long in-flight requests and runs may take before they are cut off. */
  shutdownGraceMs: number;
  http: {
    /** A request whose head and body have not all arrived after this is answered 408 and closed. */
    requestTimeoutMs: number;
    /** An idle keep-alive connection is closed after this. */
    keepAliveTimeoutMs: number;
    /** Connections open at once; the ones beyond are closed as they arrive. */
    maxConnections: number;
  };
  /** Hard caps per organization, whatever its plan (see docs/api.md, Limits). */
  orgCaps: {
    /** Tasks of any status. */
    tasks: number;
    skills: number;
    sources: number;
    /** API keys not revoked. */
    apiKeys: number;
    /** Destinations over all its tasks. */
    destinations: number;
    /** UTF-8 bytes of all its skills' content. */
    skillContentBytes: number;
    /** UTF-8 bytes of all its tasks' prompts. */
    taskPromptBytes: number;
    /** Source connection tests running at once in one process. */
    sourceTests: number;
    /** Stdio MCP server processes running at once in one process. */
    stdioProcesses: number;
  };
  /** Stdio MCP server processes running at once in one process, all organizations together. */
  maxStdioProcesses: number;
}

const MB = 1024 * 1024;
const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A comma list of durations (`500ms`, `5s`, `5m`, `2h`; a bare number is seconds), at most 20. */
function retrySchedule(name: string, raw: string): number[] {
  const delays = raw.split(',').map((part) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(part.trim());
    if (!m?.[1])
      throw new ConfigError(name, `must be a comma list of durations such as 5s,5m,2h, got "${part.trim()}"`);
    const ms = Number(m[1]) * (DURATION_UNITS[m[2] ?? 's'] ?? 1000);
    if (ms > 7 * 86_400_000) throw new ConfigError(name, `has a delay over 7 days: "${part.trim()}"`);
    return Math.round(ms);
  });
  if (delays.length > 20) throw new ConfigError(name, 'may list at most 20 retries');
  return delays;
}

/** SVC_ROLE: `all` or a comma list of roles. */
function roleSet(raw: string): Set<Role> {
  const roles = new Set<Role>();
  for (const r of raw.split(',').map((part) => part.trim())) {
    if (r === 'all') {
      for (const x of ROLES) roles.add(x);
    } else if ((ROLES as readonly string[]).includes(r)) roles.add(r as Role);
    else throw new ConfigError('SVC_ROLE', `must be all, api, scheduler or worker (comma list), got "${r}"`);
  }
  return roles;
}

export function parseSecretKey(raw: string, name = 'SVC_SECRET_KEY'): Buffer {
  const key = Buffer.from(raw, 'base64');
  if (key.length !== 32 || !/^[A-Za-z0-9+/=_-]+$/.test(raw)) {
    throw new ConfigError(name, 'must be 32 random bytes in base64 (try: openssl rand -base64 32)');
  }
  return key;
}

/** What the configuration needs to know of the system it runs on (replaceable in tests). */
export interface ConfigSystem {
  uid: number | undefined;
  passwd: () => string;
}
const SYSTEM: ConfigSystem = {
  uid: process.getuid?.(),
  passwd: () => readFileSync('/etc/passwd', 'utf8'),
};

export function loadConfig(env: RawEnv, system: ConfigSystem = SYSTEM): Config {
  const e = readEnv(env);
  const roles = roleSet(e.SVC_ROLE);

  const secretKey = e.SVC_SECRET_KEY === undefined ? undefined : parseSecretKey(e.SVC_SECRET_KEY);
  if (e.DATABASE_URL && !secretKey) {
    throw new ConfigError('SVC_SECRET_KEY', 'is required with DATABASE_URL (try: openssl rand -base64 32)');
  }

  const stdio = parseStdioCommands(e.SVC_STDIO_COMMANDS ?? '');
  if (typeof stdio === 'string') throw new ConfigError('SVC_STDIO_COMMANDS', stdio);
  const stdioUser = resolveStdioUser(e.SVC_STDIO_USER, system.uid, system.passwd, stdio.commands.length > 0);
  if (typeof stdioUser === 'string') throw new ConfigError('SVC_STDIO_USER', stdioUser);

  if (e.SVC_CONNECTOR_PROVIDER && !e.SVC_CONNECTOR_API_KEY)
    throw new ConfigError('SVC_CONNECTOR_API_KEY', 'is required when SVC_CONNECTOR_PROVIDER is set');
  const oauthClients = parseOAuthClients(e.SVC_OAUTH_CLIENTS ?? '');
  if (typeof oauthClients === 'string') throw new ConfigError('SVC_OAUTH_CLIENTS', oauthClients);

  const displayHost = e.HOST === '0.0.0.0' || e.HOST === '::' ? '127.0.0.1' : e.HOST;
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.SVC_DATA_DIR,
    embeddedFsync: e.SVC_EMBEDDED_FSYNC,
    dbPoolSize: e.SVC_DB_POOL_SIZE,
    roles,
    adminToken: e.SVC_ADMIN_TOKEN,
    secretKey,
    publicUrl: e.SVC_PUBLIC_URL ?? `http://${displayHost}:${e.PORT}`,
    publicUrlSet: e.SVC_PUBLIC_URL !== undefined,
    allowPrivateUrls: e.SVC_ALLOW_PRIVATE_URLS,
    stdioCommands: stdio.commands,
    stdioEnv: stdio.env,
    stdioUser,
    // The process's own search path, not a setting of the service: stdio commands are found on it.
    stdioSearchPath: env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    oauthClients,
    model: {
      baseUrl: e.SVC_MODEL_BASE_URL ?? 'https://openrouter.ai/api/v1',
      apiKey: e.SVC_MODEL_API_KEY,
      requestTimeoutMs: e.SVC_MODEL_TIMEOUT_SECONDS * 1000,
      maxSteps: e.SVC_MAX_TOOL_STEPS,
      maxOutputTokens: e.SVC_MAX_OUTPUT_TOKENS,
      maxOutputChars: e.SVC_MAX_OUTPUT_CHARS,
    },
    smtp: { url: e.SVC_SMTP_URL, from: e.SVC_EMAIL_FROM },
    sms: {
      apiBase: e.SVC_SMS_API_BASE,
      accountSid: e.SVC_SMS_ACCOUNT_SID,
      authToken: e.SVC_SMS_AUTH_TOKEN,
      from: e.SVC_SMS_FROM,
    },
    connector: e.SVC_CONNECTOR_PROVIDER
      ? {
          provider: e.SVC_CONNECTOR_PROVIDER,
          apiKey: e.SVC_CONNECTOR_API_KEY ?? '',
          apiBase: (e.SVC_CONNECTOR_API_BASE ?? 'https://backend.composio.dev').replace(/\/+$/, ''),
        }
      : undefined,
    stripe: {
      secretKey: e.STRIPE_SECRET_KEY,
      webhookSecret: e.STRIPE_WEBHOOK_SECRET,
      priceId: e.STRIPE_PRICE_ID,
      apiBase: e.SVC_STRIPE_API_BASE,
      meterEventName: e.STRIPE_METER_EVENT_NAME,
    },
    logLevel: e.SVC_LOG_LEVEL,
    trustProxyHops: e.SVC_TRUST_PROXY_HOPS,
    createDemoOrg: e.SVC_CREATE_DEMO_ORG,
    signupEnabled: e.SVC_SIGNUP,
    modelsFile: e.SVC_MODELS_FILE,
    scheduler: { catchUpWindowMs: e.SVC_CATCHUP_WINDOW_SECONDS * 1000 },
    worker: {
      concurrency: e.SVC_WORKER_CONCURRENCY,
      orgConcurrency: e.SVC_ORG_CONCURRENCY,
      claimAheadBelowMs: e.SVC_WORKER_CLAIM_AHEAD_MS,
      leaseMs: e.SVC_RUN_LEASE_SECONDS * 1000,
      maxAttempts: e.SVC_RUN_MAX_ATTEMPTS,
      runTimeoutMs: e.SVC_RUN_TIMEOUT_SECONDS * 1000,
      runRetentionDays: e.SVC_RUN_RETENTION_DAYS,
    },
    delivery: {
      retryScheduleMs: retrySchedule('SVC_DELIVERY_RETRY_SCHEDULE', e.SVC_DELIVERY_RETRY_SCHEDULE),
      concurrency: e.SVC_DELIVERY_CONCURRENCY,
      attemptTimeoutMs: e.SVC_DELIVERY_TIMEOUT_SECONDS * 1000,
    },
    shutdownGraceMs: e.SVC_SHUTDOWN_GRACE_SECONDS * 1000,
    http: {
      requestTimeoutMs: e.SVC_HTTP_REQUEST_TIMEOUT_SECONDS * 1000,
      keepAliveTimeoutMs: e.SVC_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS * 1000,
      maxConnections: e.SVC_HTTP_MAX_CONNECTIONS,
    },
    orgCaps: {
      tasks: e.SVC_MAX_TASKS_PER_ORG,
      skills: e.SVC_MAX_SKILLS_PER_ORG,
      sources: e.SVC_MAX_SOURCES_PER_ORG,
      apiKeys: e.SVC_MAX_API_KEYS_PER_ORG,
      destinations: e.SVC_MAX_DESTINATIONS_PER_ORG,
      skillContentBytes: e.SVC_MAX_SKILL_CONTENT_MB_PER_ORG * MB,
      taskPromptBytes: e.SVC_MAX_TASK_PROMPT_MB_PER_ORG * MB,
      sourceTests: e.SVC_MAX_SOURCE_TESTS_PER_ORG,
      stdioProcesses: e.SVC_MAX_STDIO_PROCESSES_PER_ORG,
    },
    maxStdioProcesses: e.SVC_MAX_STDIO_PROCESSES,
  };
}
