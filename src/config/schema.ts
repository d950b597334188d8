/**
 * Every environment variable the service reads, as one TypeBox schema: its type, default,
 * constraints and a description. src/config/env.ts parses the environment against it at boot,
 * and scripts/config-docs.ts writes the configuration tables of docs/operations.md and the whole
 * of .env.example from it, so the docs cannot list a variable, a default or a range the code
 * does not have.
 *
 * Annotations besides JSON Schema's own (TypeBox keeps unknown options on the schema):
 * - `group`: the section of .env.example and the table of docs/operations.md it is listed in;
 * - `protocols`: a URL variable, and the schemes it accepts;
 * - `lowercase`: the value is compared in lower case;
 * - `example`: the value shown in .env.example when there is no default to show;
 * - `defaultText` / `valuesText`: the docs' words for a default computed at boot, or for values
 *   a parser of src/config.ts checks.
 */
import { type Static, Type } from 'typebox';

export const CONFIG_GROUPS = {
  listening: 'Listening',
  process: 'Process',
  embedded: 'Embedded database',
  postgres: 'PostgreSQL and secrets',
  scheduling: 'Scheduler and worker',
  models: 'Models',
  sources: 'Sources',
  delivery: 'Delivery',
  dashboard: 'Dashboard',
  billing: 'Billing (Stripe)',
  caps: 'Per-organization caps (whatever the plan; a create past one answers 403)',
  http: 'HTTP bounds',
} as const;
export type ConfigGroup = keyof typeof CONFIG_GROUPS;

// A type alias rather than an interface: TypeBox's options take it as a plain record.
type Doc = {
  group: ConfigGroup;
  description: string;
  example?: string;
  defaultText?: string;
  valuesText?: string;
};

const int = (minimum: number, maximum: number, dflt: number, doc: Doc) =>
  Type.Integer({ minimum, maximum, default: dflt, ...doc });
const bool = (dflt: boolean, doc: Doc) => Type.Boolean({ default: dflt, ...doc });
const text = (doc: Doc) => Type.Optional(Type.String(doc));
const url = (protocols: string[], doc: Doc) => Type.Optional(Type.String({ protocols, ...doc }));

export const CONNECTOR_PROVIDERS = ['composio'] as const;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const EnvSchema = Type.Object({
  // Listening
  PORT: int(0, 65535, 8787, {
    group: 'listening',
    description: 'TCP port of the HTTP server (0 = any free port).',
  }),
  HOST: Type.String({
    default: '127.0.0.1',
    group: 'listening',
    description: 'Address to listen on; `0.0.0.0` (or `::`) listens on every interface.',
  }),
  SVC_PUBLIC_URL: url(['http:', 'https:'], {
    group: 'listening',
    example: 'https://tasks.example.com',
    defaultText: '`http://HOST:PORT` (`127.0.0.1` for `0.0.0.0` or `::`)',
    description:
      "The service's public base URL (a trailing slash is dropped): the server URL in the OpenAPI document, the address the CLI's operator commands call, and, only when set, the base of the run link in e-mails and SMS (`<SVC_PUBLIC_URL>/api/svc/runs/<id>`); with https, session cookies are `Secure`.",
  }),
  SVC_TRUST_PROXY_HOPS: int(0, 10, 0, {
    group: 'listening',
    description:
      'Reverse-proxy hops whose `X-Forwarded-For` is believed when determining the client address (used to rate-limit unauthenticated requests and password attempts), and whose `X-Forwarded-Proto` tells whether a request came over https (the API reference page then asks browsers to upgrade to https); 0 = the socket address. Behind one proxy, set 1.',
  }),

  // Process
  SVC_ROLE: Type.String({
    default: 'all',
    lowercase: true,
    group: 'process',
    valuesText: '`all`, `api`, `scheduler`, `worker`, or a comma list',
    description:
      'What this process does; `all` = api + scheduler + worker. Only a process with `api` serves the API and the dashboard (every process serves `/healthz`, `/readyz`, `/metrics`). `svc start --role ...` overrides it.',
  }),
  SVC_ADMIN_TOKEN: Type.Optional(
    Type.String({
      minLength: 16,
      group: 'process',
      description:
        'Bearer token of the admin API (`/api/admin/`); unset = the admin API is off (its paths answer 404).',
    }),
  ),
  SVC_LOG_LEVEL: Type.Enum(LOG_LEVELS, {
    default: 'info',
    lowercase: true,
    group: 'process',
    description: 'Log level; logs are JSON lines on stdout.',
  }),
  SVC_CREATE_DEMO_ORG: bool(true, {
    group: 'process',
    description:
      'On start, when the database holds no organization at all, create a demo organization and print its id and API key once. Set `false` before the first start of a production database.',
  }),
  SVC_SHUTDOWN_GRACE_SECONDS: int(0, 3600, 30, {
    group: 'process',
    description:
      'On SIGTERM/SIGINT, seconds that requests, runs and deliveries in flight get to finish; runs still executing then are stopped and go back to the queue for another worker, and the process exits at the latest 10 s later.',
  }),

  // Embedded database
  SVC_DATA_DIR: Type.String({
    default: './data',
    group: 'embedded',
    description:
      'Data directory of the embedded database (ignored with `DATABASE_URL`), relative to the working directory; it also holds the generated `secret.key` and the `svc.lock` process lock. `memory://` keeps everything in memory (nothing survives a restart; used by the tests).',
  }),
  SVC_EMBEDDED_FSYNC: bool(true, {
    group: 'embedded',
    description:
      'Each commit of the embedded database waits until it is on disk, so acknowledged writes survive a power cut; `false` (PGlite\'s fsync=off) lets the operating system write it back later: faster commits, a process crash still loses nothing acknowledged, but a power cut can lose recent writes or corrupt the database (docs/operations.md, "What survives a crash or a power cut").',
  }),

  // PostgreSQL and secrets
  DATABASE_URL: url(['postgres:', 'postgresql:'], {
    group: 'postgres',
    example: 'postgres://svc:password@127.0.0.1:5432/svc',
    defaultText: 'unset (the embedded database)',
    description:
      'PostgreSQL server. Unset = the embedded PGlite database in `SVC_DATA_DIR`, usable by one process only. Setting it makes `SVC_SECRET_KEY` required.',
  }),
  SVC_DB_POOL_SIZE: int(1, 500, 10, {
    group: 'postgres',
    description: "Connections in each process's PostgreSQL pool (ignored without `DATABASE_URL`).",
  }),
  SVC_SECRET_KEY: text({
    group: 'postgres',
    valuesText: '32 random bytes in base64',
    defaultText: 'unset (embedded mode: `SVC_DATA_DIR/secret.key`)',
    description:
      'Key that encrypts secrets at rest (AES-256-GCM), e.g. from `openssl rand -base64 32`. Required with `DATABASE_URL`, and the same for every process on that database: a process with another key than the one the database was first started with refuses to start. In embedded mode, when unset, it is generated on first start into `SVC_DATA_DIR/secret.key` (mode 0600) and read from there; when set, it is used instead of that file.',
  }),

  // Scheduler and worker
  SVC_CATCHUP_WINDOW_SECONDS: int(0, 7 * 86_400, 3600, {
    group: 'scheduling',
    description:
      'After downtime (or a scheduler behind), the most recent missed slot of a task still runs if it is at most this old; older slots are skipped.',
  }),
  SVC_WORKER_CONCURRENCY: int(1, 256, 4, {
    group: 'scheduling',
    description: 'Runs one worker process executes at once.',
  }),
  SVC_WORKER_CLAIM_AHEAD_MS: int(0, 60_000, 50, {
    group: 'scheduling',
    description:
      "While a worker's runs take less than this many milliseconds on average (from their start to the model's last answer), each claim also takes runs beyond its free places, up to twice SVC_WORKER_CONCURRENCY held (at most 32, or SVC_WORKER_CONCURRENCY when that is more), started the moment a place frees (they count as running meanwhile); 0 never claims ahead.",
  }),
  SVC_ORG_CONCURRENCY: int(1, 256, 2, {
    group: 'scheduling',
    description: 'Runs one organization may have running at once, across all workers.',
  }),
  SVC_RUN_LEASE_SECONDS: int(1, 3600, 30, {
    group: 'scheduling',
    description:
      "Seconds a claimed run stays a worker's without a heartbeat: a worker renews its runs' leases every third of this, and a dead worker's runs are taken over this long after it stopped.",
  }),
  SVC_RUN_MAX_ATTEMPTS: int(1, 20, 3, {
    group: 'scheduling',
    description: 'Starts of one run (takeovers after a lost lease included) before it is failed.',
  }),
  SVC_RUN_RETENTION_DAYS: int(0, 36_500, 90, {
    group: 'scheduling',
    description:
      'Days an ended run is kept (with its output, deliveries and their attempts) after it was created; older ones are deleted by the api process every minute. Usage, billing and the statistics keep counting them. 0 keeps every run.',
  }),
  SVC_RUN_TIMEOUT_SECONDS: int(1, 86_400, 600, {
    group: 'scheduling',
    description: 'A run still executing after this many seconds is stopped and failed.',
  }),

  // Models
  SVC_MODEL_BASE_URL: url(['http:', 'https:'], {
    group: 'models',
    defaultText: '`https://openrouter.ai/api/v1`',
    example: 'https://openrouter.ai/api/v1',
    description: 'OpenAI-compatible Chat Completions endpoint (streaming) that runs call.',
  }),
  SVC_MODEL_API_KEY: text({
    group: 'models',
    description:
      'API key of the model provider. Without one every run fails with an error saying so; the rest of the service works.',
  }),
  SVC_MODEL_TIMEOUT_SECONDS: int(1, 3600, 120, {
    group: 'models',
    description:
      'Seconds one model request may wait for its (streamed) answer to start before it is retried, so a long answer is not cut off by it; each request is tried 5 times in all.',
  }),
  SVC_MAX_TOOL_STEPS: int(1, 100, 10, {
    group: 'models',
    description:
      'Model calls in one run: a model still calling tools after this many fails the run (`SVC_RUN_TIMEOUT_SECONDS` bounds the whole run).',
  }),
  SVC_MAX_OUTPUT_TOKENS: int(0, 1_000_000, 16_384, {
    group: 'models',
    description:
      '`max_tokens` of each model request; 0 sends none, for a provider that refuses the parameter (the character limit still applies). An answer the provider ends there is kept and marked as cut.',
  }),
  SVC_MAX_OUTPUT_CHARS: int(1000, 10_000_000, 200_000, {
    group: 'models',
    description:
      'Characters of one model answer (text and tool calls), for a provider that ignores `max_tokens`: the stream is stopped there; a text answer is kept, cut and marked, an answer calling tools fails the run. Its usage is estimated (4 characters a token).',
  }),
  SVC_MODELS_FILE: text({
    group: 'models',
    defaultText: 'unset (the shipped catalog)',
    description:
      'A JSON file that replaces the shipped model catalog (`src/domain/models-catalog.json` shows the format; docs/operations.md, "Model catalog", lists the fields). Read and checked at start; a bad file stops startup with one line naming the file and the problem.',
  }),

  // Sources
  SVC_STDIO_COMMANDS: text({
    group: 'sources',
    example: 'mcp-server-git[GITHUB_TOKEN,REPO_PATH],node',
    defaultText: 'empty (no stdio sources)',
    valuesText: 'comma list of commands, each with an optional `[NAME,...]`',
    description:
      "Commands that stdio MCP sources may run, compared exactly, each optionally followed by the `config.env` names its servers may be given, in brackets (a command without brackets gets none). Checked when a source is saved and again each time it is started; empty = stdio sources are refused. The command is looked up on this service's PATH; the server gets a fixed PATH, HOME and LANG plus its allowed `config.env`, never this service's environment.",
  }),
  SVC_STDIO_USER: text({
    group: 'sources',
    example: 'nobody',
    defaultText: '`nobody` when the service runs as root, else unset',
    valuesText: 'user name, `uid:gid`, or a uid range `FIRST-LAST`',
    description:
      "The user stdio servers run as when this service runs as root; never root. With a uid range (e.g. `200000-299999`) each running server gets a uid of its own (gid the same number), so that servers of different organizations cannot read each other's environment. That user must be able to run the commands and read what they load; it cannot read this service's environment or its 0700 data directory. Setting it when the service is not root stops startup.",
  }),
  SVC_OAUTH_CLIENTS: text({
    group: 'sources',
    example: 'github=Iv1.0123abcd:0123456789abcdef,linear=lin_client_id',
    defaultText: 'empty (dynamic client registration only)',
    valuesText: 'comma list of `provider=clientId` or `provider=clientId:clientSecret`',
    description:
      "OAuth clients the operator registered with providers, for sources with authType `oauth` whose `authConfig.provider` names one. Register each with the redirect URL `<SVC_PUBLIC_URL>/oauth/callback`. A source whose provider is not listed uses the authorization server's dynamic client registration (MCP servers that offer it); an api source needs a listed provider.",
  }),
  SVC_ALLOW_PRIVATE_URLS: bool(false, {
    group: 'sources',
    description:
      'Allow http/websocket MCP sources, api sources, the `fetch_url` tool and webhooks to reach loopback and private network addresses. Keep `false` unless every user is trusted.',
  }),
  SVC_CONNECTOR_PROVIDER: Type.Optional(
    Type.Enum(CONNECTOR_PROVIDERS, {
      lowercase: true,
      group: 'sources',
      defaultText: 'unset (connector sources answer "connector provider not configured")',
      description:
        'The connector provider of sources with `authType` `connector`: `composio` (its v3 REST API). Needs `SVC_CONNECTOR_API_KEY`.',
    }),
  ),
  SVC_CONNECTOR_API_KEY: text({
    group: 'sources',
    description:
      "The connector provider's API key (for `composio`, a project API key, sent as `x-api-key`). Secret: never shown or logged.",
  }),
  SVC_CONNECTOR_API_BASE: url(['http:', 'https:'], {
    group: 'sources',
    defaultText: '`https://backend.composio.dev`',
    description:
      "The connector provider's API base URL (a test double or a proxy). Its requests pass the private-address guard like other outbound calls (`SVC_ALLOW_PRIVATE_URLS`).",
  }),

  // Delivery
  SVC_SMTP_URL: url(['smtp:', 'smtps:'], {
    group: 'delivery',
    example: 'smtps://user:password@smtp.example.com:465',
    description:
      'Mail server for e-mail delivery, credentials in the URL. Unset = e-mail destinations fail with an error saying so (the run itself is not affected).',
  }),
  SVC_EMAIL_FROM: text({
    group: 'delivery',
    example: 'Scheduled tasks <tasks@example.com>',
    description: 'The From address of e-mails (`Name <address>` allowed); unset = e-mail destinations fail.',
  }),
  SVC_SMS_API_BASE: url(['http:', 'https:'], {
    group: 'delivery',
    example: 'https://api.twilio.com',
    description:
      'Base URL of a Twilio-compatible Messages API for SMS delivery. Unset (or any of the three below unset) = SMS destinations fail with an error naming the missing variables.',
  }),
  SVC_SMS_ACCOUNT_SID: text({ group: 'delivery', description: 'Account of the SMS API (Basic auth user).' }),
  SVC_SMS_AUTH_TOKEN: text({ group: 'delivery', description: 'Token of the SMS API (Basic auth password).' }),
  SVC_SMS_FROM: text({ group: 'delivery', description: 'Sending number of SMS.' }),
  SVC_DELIVERY_RETRY_SCHEDULE: Type.String({
    default: '5s,5m,30m,2h,5h,10h,10h',
    group: 'delivery',
    valuesText:
      'comma list of `500ms`, `5s`, `5m`, `2h`… (a bare number is seconds); at most 20, each at most 7 days',
    description:
      'Delays before the retries of a failed delivery, each with ±20% jitter; its length is the number of retries. The default follows Standard Webhooks: 8 attempts over about 27 hours.',
  }),
  SVC_DELIVERY_TIMEOUT_SECONDS: int(1, 30, 15, {
    group: 'delivery',
    description:
      'Seconds one delivery attempt waits for a webhook receiver or the SMS provider to answer, and for each step of an SMTP exchange (connect, greeting, each reply); then the attempt fails and is retried.',
  }),
  SVC_DELIVERY_CONCURRENCY: int(1, 256, 8, {
    group: 'delivery',
    description: 'Deliveries one worker process sends at once.',
  }),

  // Dashboard
  SVC_SIGNUP: bool(true, {
    group: 'dashboard',
    description:
      "Anyone who reaches the dashboard may sign up, creating an organization on the free plan. Set `false` on a service open to the internet unless that is wanted (free organizations' runs spend your model key within the free plan's limits); then create people with `svc user create` or the admin API.",
  }),

  // Billing
  STRIPE_SECRET_KEY: text({
    group: 'billing',
    description:
      'The Stripe secret key; unset = checkout and portal answer 503 `billing_not_configured`, the rest of the service works.',
  }),
  STRIPE_WEBHOOK_SECRET: text({
    group: 'billing',
    description: 'The signing secret of the webhook endpoint `<SVC_PUBLIC_URL>/api/svc/billing/webhook`.',
  }),
  STRIPE_PRICE_ID: text({
    group: 'billing',
    description: 'The recurring price of the paid plan that checkout subscribes to.',
  }),
  SVC_STRIPE_API_BASE: url(['http:', 'https:'], {
    group: 'billing',
    description: 'Send Stripe API calls to another server (a test double or a proxy).',
  }),
  STRIPE_METER_EVENT_NAME: Type.String({
    default: 'svc_usage_cents',
    group: 'billing',
    description: 'The event name of the Stripe meter that paid-plan usage beyond the credits is reported to.',
  }),

  // Per-organization caps
  SVC_MAX_TASKS_PER_ORG: int(1, 1_000_000, 1000, {
    group: 'caps',
    description:
      "Tasks of one organization, paused and completed ones included (independent of the plan's `tasksLimit` on active tasks).",
  }),
  SVC_MAX_TASK_PROMPT_MB_PER_ORG: int(1, 10_000, 10, {
    group: 'caps',
    description: "MiB (UTF-8) of all the prompts of one organization's tasks.",
  }),
  SVC_MAX_DESTINATIONS_PER_ORG: int(1, 1_000_000, 1000, {
    group: 'caps',
    description: 'Destinations over all the tasks of one organization.',
  }),
  SVC_MAX_SKILLS_PER_ORG: int(1, 100_000, 200, { group: 'caps', description: 'Skills of one organization.' }),
  SVC_MAX_SKILL_CONTENT_MB_PER_ORG: int(1, 10_000, 10, {
    group: 'caps',
    description: "MiB (UTF-8) of the content of all of one organization's skills.",
  }),
  SVC_MAX_SOURCES_PER_ORG: int(1, 100_000, 50, {
    group: 'caps',
    description: 'Sources of one organization.',
  }),
  SVC_MAX_API_KEYS_PER_ORG: int(1, 100_000, 100, {
    group: 'caps',
    description:
      'API keys of one organization that are not revoked (of its revoked keys, the latest 100 are kept).',
  }),
  SVC_MAX_SOURCE_TESTS_PER_ORG: int(1, 100, 2, {
    group: 'caps',
    description: 'Connection tests one organization runs at once in one process; more answer 429.',
  }),
  SVC_MAX_STDIO_PROCESSES_PER_ORG: int(1, 1000, 4, {
    group: 'caps',
    description: 'Stdio MCP servers one organization runs at once in one process (tests and runs together).',
  }),
  SVC_MAX_STDIO_PROCESSES: int(1, 10_000, 32, {
    group: 'caps',
    description: 'Stdio MCP servers one process runs at once, all organizations together.',
  }),

  // HTTP bounds
  SVC_HTTP_REQUEST_TIMEOUT_SECONDS: int(1, 3600, 30, {
    group: 'http',
    description:
      "Seconds within which a request's head and body must all arrive; a client trickling its body is answered 408 and the connection is closed.",
  }),
  SVC_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS: int(1, 3600, 5, {
    group: 'http',
    description: 'Seconds after which an idle keep-alive connection is closed.',
  }),
  SVC_HTTP_MAX_CONNECTIONS: int(1, 1_000_000, 1000, {
    group: 'http',
    description: 'Connections one process keeps open at once; one more is closed as it arrives.',
  }),
});

/** The environment once parsed: every variable with a default has a value. */
export type Env = Static<typeof EnvSchema>;
