/**
 * The configuration contract: every environment variable the service reads is parsed and
 * validated here, once, at boot, into a typed object that is passed down. Nothing else reads
 * process.env. A bad value fails startup with one line naming the variable.
 */
import { readFileSync } from 'node:fs';
import { parseStdioCommands, resolveStdioUser, type StdioUser } from './lib/stdio-config.ts';

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
  stripe: {
    secretKey: string | undefined;
    webhookSecret: string | undefined;
    priceId: string | undefined;
    apiBase: string | undefined;
    /** The Stripe meter's event name that usage beyond the plan's credits is reported to. */
    meterEventName: string;
  };
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
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
    /** How long a claimed run stays a worker's without a heartbeat. */
    leaseMs: number;
    /** Starts of one run (takeovers after a lost lease included) before it is failed. */
    maxAttempts: number;
    /** A run still executing after this is failed. */
    runTimeoutMs: number;
  };
  delivery: {
    /** Delays before the retries of a failed delivery; its length is the number of retries. */
    retryScheduleMs: readonly number[];
    /** Deliveries one worker process sends at once. */
    concurrency: number;
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

export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

const DEFAULT_MODEL_BASE_URL = 'https://openrouter.ai/api/v1';
const MB = 1024 * 1024;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function int(env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = str(env, name);
  if (raw === undefined) return dflt;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: Env, name: string, dflt: boolean): boolean {
  const raw = str(env, name)?.toLowerCase();
  if (raw === undefined) return dflt;
  if (['true', '1', 'yes'].includes(raw)) return true;
  if (['false', '0', 'no'].includes(raw)) return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = str(env, name);
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'must be a URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(' or ')}`);
  }
  return raw.replace(/\/+$/, '');
}

/**
 * The Standard Webhooks schedule after the first attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
 * 10 h (eight attempts over about 27 hours).
 */
const DEFAULT_RETRY_SCHEDULE = '5s,5m,30m,2h,5h,10h,10h';
const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A comma list of durations (`500ms`, `5s`, `5m`, `2h`; a bare number is seconds), at most 20. */
function retrySchedule(env: Env, name: string, dflt: string): number[] {
  const raw = str(env, name) ?? dflt;
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

export function loadConfig(env: Env, system: ConfigSystem = SYSTEM): Config {
  const port = int(env, 'PORT', 8787, 0, 65535);
  const host = str(env, 'HOST') ?? '127.0.0.1';
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);

  const roleNames = (str(env, 'SVC_ROLE') ?? 'all').split(',').map((r) => r.trim().toLowerCase());
  const roles = new Set<Role>();
  for (const r of roleNames) {
    if (r === 'all') {
      for (const x of ROLES) roles.add(x);
    } else if ((ROLES as readonly string[]).includes(r)) roles.add(r as Role);
    else throw new ConfigError('SVC_ROLE', `must be all, api, scheduler or worker (comma list), got "${r}"`);
  }

  const secretRaw = str(env, 'SVC_SECRET_KEY');
  const secretKey = secretRaw === undefined ? undefined : parseSecretKey(secretRaw);
  if (databaseUrl && !secretKey) {
    throw new ConfigError('SVC_SECRET_KEY', 'is required with DATABASE_URL (try: openssl rand -base64 32)');
  }

  const adminToken = str(env, 'SVC_ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError('SVC_ADMIN_TOKEN', 'must be at least 16 characters');
  }

  const logLevel = (str(env, 'SVC_LOG_LEVEL') ?? 'info').toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError('SVC_LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  }

  const stdio = parseStdioCommands(str(env, 'SVC_STDIO_COMMANDS') ?? '');
  if (typeof stdio === 'string') throw new ConfigError('SVC_STDIO_COMMANDS', stdio);
  const stdioUser = resolveStdioUser(
    str(env, 'SVC_STDIO_USER'),
    system.uid,
    system.passwd,
    stdio.commands.length > 0,
  );
  if (typeof stdioUser === 'string') throw new ConfigError('SVC_STDIO_USER', stdioUser);

  const displayHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return {
    port,
    host,
    databaseUrl,
    dataDir: str(env, 'SVC_DATA_DIR') ?? './data',
    embeddedFsync: bool(env, 'SVC_EMBEDDED_FSYNC', true),
    dbPoolSize: int(env, 'SVC_DB_POOL_SIZE', 10, 1, 500),
    roles,
    adminToken,
    secretKey,
    publicUrl: url(env, 'SVC_PUBLIC_URL', ['http:', 'https:']) ?? `http://${displayHost}:${port}`,
    publicUrlSet: str(env, 'SVC_PUBLIC_URL') !== undefined,
    allowPrivateUrls: bool(env, 'SVC_ALLOW_PRIVATE_URLS', false),
    stdioCommands: stdio.commands,
    stdioEnv: stdio.env,
    stdioUser,
    stdioSearchPath: env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    model: {
      baseUrl: url(env, 'SVC_MODEL_BASE_URL', ['http:', 'https:']) ?? DEFAULT_MODEL_BASE_URL,
      apiKey: str(env, 'SVC_MODEL_API_KEY'),
      requestTimeoutMs: int(env, 'SVC_MODEL_TIMEOUT_SECONDS', 120, 1, 3600) * 1000,
      maxSteps: int(env, 'SVC_MAX_TOOL_STEPS', 10, 1, 100),
      maxOutputTokens: int(env, 'SVC_MAX_OUTPUT_TOKENS', 16_384, 0, 1_000_000),
      maxOutputChars: int(env, 'SVC_MAX_OUTPUT_CHARS', 200_000, 1_000, 10_000_000),
    },
    smtp: { url: url(env, 'SVC_SMTP_URL', ['smtp:', 'smtps:']), from: str(env, 'SVC_EMAIL_FROM') },
    sms: {
      apiBase: url(env, 'SVC_SMS_API_BASE', ['http:', 'https:']),
      accountSid: str(env, 'SVC_SMS_ACCOUNT_SID'),
      authToken: str(env, 'SVC_SMS_AUTH_TOKEN'),
      from: str(env, 'SVC_SMS_FROM'),
    },
    stripe: {
      secretKey: str(env, 'STRIPE_SECRET_KEY'),
      webhookSecret: str(env, 'STRIPE_WEBHOOK_SECRET'),
      priceId: str(env, 'STRIPE_PRICE_ID'),
      apiBase: url(env, 'SVC_STRIPE_API_BASE', ['http:', 'https:']),
      meterEventName: str(env, 'STRIPE_METER_EVENT_NAME') ?? 'svc_usage_cents',
    },
    logLevel: logLevel as Config['logLevel'],
    trustProxyHops: int(env, 'SVC_TRUST_PROXY_HOPS', 0, 0, 10),
    createDemoOrg: bool(env, 'SVC_CREATE_DEMO_ORG', true),
    signupEnabled: bool(env, 'SVC_SIGNUP', true),
    modelsFile: str(env, 'SVC_MODELS_FILE'),
    scheduler: {
      catchUpWindowMs: int(env, 'SVC_CATCHUP_WINDOW_SECONDS', 3600, 0, 7 * 86_400) * 1000,
    },
    worker: {
      concurrency: int(env, 'SVC_WORKER_CONCURRENCY', 4, 1, 256),
      orgConcurrency: int(env, 'SVC_ORG_CONCURRENCY', 2, 1, 256),
      leaseMs: int(env, 'SVC_RUN_LEASE_SECONDS', 30, 1, 3600) * 1000,
      maxAttempts: int(env, 'SVC_RUN_MAX_ATTEMPTS', 3, 1, 20),
      runTimeoutMs: int(env, 'SVC_RUN_TIMEOUT_SECONDS', 600, 1, 86_400) * 1000,
    },
    delivery: {
      retryScheduleMs: retrySchedule(env, 'SVC_DELIVERY_RETRY_SCHEDULE', DEFAULT_RETRY_SCHEDULE),
      concurrency: int(env, 'SVC_DELIVERY_CONCURRENCY', 8, 1, 256),
    },
    shutdownGraceMs: int(env, 'SVC_SHUTDOWN_GRACE_SECONDS', 30, 0, 3600) * 1000,
    http: {
      requestTimeoutMs: int(env, 'SVC_HTTP_REQUEST_TIMEOUT_SECONDS', 30, 1, 3600) * 1000,
      keepAliveTimeoutMs: int(env, 'SVC_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS', 5, 1, 3600) * 1000,
      maxConnections: int(env, 'SVC_HTTP_MAX_CONNECTIONS', 1000, 1, 1_000_000),
    },
    orgCaps: {
      tasks: int(env, 'SVC_MAX_TASKS_PER_ORG', 1000, 1, 1_000_000),
      skills: int(env, 'SVC_MAX_SKILLS_PER_ORG', 200, 1, 100_000),
      sources: int(env, 'SVC_MAX_SOURCES_PER_ORG', 50, 1, 100_000),
      destinations: int(env, 'SVC_MAX_DESTINATIONS_PER_ORG', 1000, 1, 1_000_000),
      skillContentBytes: int(env, 'SVC_MAX_SKILL_CONTENT_MB_PER_ORG', 10, 1, 10_000) * MB,
      taskPromptBytes: int(env, 'SVC_MAX_TASK_PROMPT_MB_PER_ORG', 10, 1, 10_000) * MB,
      sourceTests: int(env, 'SVC_MAX_SOURCE_TESTS_PER_ORG', 2, 1, 100),
      stdioProcesses: int(env, 'SVC_MAX_STDIO_PROCESSES_PER_ORG', 4, 1, 1000),
    },
    maxStdioProcesses: int(env, 'SVC_MAX_STDIO_PROCESSES', 32, 1, 10_000),
  };
}
