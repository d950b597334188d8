// What the OpenAPI document says of every operation alike, added after @fastify/swagger has built
// it from the route schemas: the tags in the order a user meets them, the errors any route can
// answer whatever it does, and the response headers. Each route declares what is its own
// (operationId, summary, description, its errors) in its schema.

/** Tags in the order a user meets them: tasks first, the operator's and the probes' last. */
export const TAGS = [
  { name: 'tasks', description: 'Scheduled AI tasks: create, change, run now, and their schedule slots' },
  { name: 'runs', description: 'What each run of a task did: output, cost, deliveries; cancel, replay' },
  { name: 'skills', description: 'Reusable Markdown instructions that tasks attach to their prompt' },
  {
    name: 'sources',
    description: 'Tools a task can call while it runs: MCP servers, HTTP APIs, local tools',
  },
  { name: 'destinations', description: "Where a task's results are delivered: email, SMS, webhooks" },
  { name: 'models', description: 'The AI models tasks can use, with their prices' },
  { name: 'stats', description: 'Usage statistics of the organization' },
  { name: 'billing', description: 'Plan, limits and usage; Stripe checkout and portal' },
  { name: 'admin', description: 'Operator API (SVC_ADMIN_TOKEN): organizations, API keys, users' },
  { name: 'mcp', description: 'The service as an MCP server for AI agents (docs/mcp.md)' },
  { name: 'operations', description: 'Health, readiness, metrics and this document' },
];

/** Which operations a header or an error applies to: all, those of the API-key area, or these operationIds. */
type Operations = 'all' | 'api-key' | readonly string[];
/** Which responses of those operations carry a header: all, or these statuses. */
type Statuses = 'all' | readonly number[];

interface ResponseHeader {
  name: string;
  description: string;
  schema: Record<string, unknown>;
  /** Whether every response it is declared on carries it. */
  required: boolean;
  operations: Operations;
  statuses: Statuses;
}

const INTEGER = { type: 'integer', minimum: 0 };

/**
 * Every response header the service sends, declared here once for the operations and statuses
 * that send it: a new header is one entry. They are emitted as components.headers and referenced
 * from each response.
 */
// biome-ignore format: one header a line
/** The POST operations of the API-key area, which take an Idempotency-Key (docs/api.md, Idempotency). */
const IDEMPOTENT_POSTS = [
  'createTask',
  'runTask',
  'createDestination',
  'redeliverRun',
  'cancelRun',
  'replayRun',
  'previewSchedule',
  'createSkill',
  'createSource',
  'testSource',
  'createCheckoutSession',
  'createPortalSession',
  'callMcp',
];

export const RESPONSE_HEADERS: readonly ResponseHeader[] = [
  {
    name: 'X-Request-Id',
    description:
      "The request's id, as in the logs (the caller's own X-Request-Id when it is a plain token of up to 128 characters)",
    schema: { type: 'string', maxLength: 128 },
    required: true,
    operations: 'all',
    statuses: 'all',
  },
  {
    name: 'X-RateLimit-Limit',
    description:
      'Requests the organization may make per one-minute window (per client address without a valid key)',
    schema: INTEGER,
    required: true,
    operations: 'api-key',
    statuses: 'all',
  },
  {
    name: 'X-RateLimit-Remaining',
    description: 'Requests left in the current window',
    schema: INTEGER,
    required: true,
    operations: 'api-key',
    statuses: 'all',
  },
  {
    name: 'X-RateLimit-Reset',
    description: 'When the current window ends, in Unix epoch seconds',
    schema: INTEGER,
    required: true,
    operations: 'api-key',
    statuses: 'all',
  },
  {
    name: 'Retry-After',
    description: 'Seconds to wait before retrying: always on 429, on 503 when the wait is known',
    schema: { type: 'integer', minimum: 1 },
    required: false,
    operations: 'all',
    statuses: [429, 503],
  },
  {
    name: 'ETag',
    description:
      "The resource's version (strong): send it back in If-Match to change or delete only that version, or in If-None-Match to get a 304 while it is unchanged",
    schema: { type: 'string' },
    required: true,
    operations: [
      'getTask',
      'updateTask',
      'getSkill',
      'updateSkill',
      'getSource',
      'updateSource',
      'getRun',
      'getModel',
    ],
    statuses: [200],
  },
  {
    name: 'Link',
    description: 'The next page of the list (RFC 8288, rel="next"); absent on the last page',
    schema: { type: 'string' },
    required: false,
    operations: ['listTasks', 'listSkills', 'listSources', 'listRuns', 'listTaskRuns', 'listTaskSlots'],
    statuses: [200],
  },
  {
    name: 'Location',
    description: 'The URL of the resource created',
    schema: { type: 'string', format: 'uri' },
    required: true,
    operations: [
      'createTask',
      'createSkill',
      'createSource',
      'createDestination',
      'createOrganization',
      'createApiKey',
      'createUser',
    ],
    statuses: [201],
  },
  {
    name: 'Idempotent-Replayed',
    description: 'true when the answer is the replay of an earlier request with the same Idempotency-Key',
    schema: { type: 'string', enum: ['true'] },
    required: false,
    operations: IDEMPOTENT_POSTS,
    statuses: 'all',
  },
];

/** The request headers the document declares, and the operations that take each (docs/api.md). */
const REQUEST_HEADERS: readonly {
  name: string;
  description: string;
  schema: Record<string, unknown>;
  operations: readonly string[];
}[] = [
  {
    name: 'Idempotency-Key',
    description:
      'Makes the POST safe to retry: the same key and request within 24 hours replay the first answer (with Idempotent-Replayed: true); the same key with another request is a 422, and one while the first is still in flight a 409',
    schema: { type: 'string', minLength: 1, maxLength: 255 },
    operations: IDEMPOTENT_POSTS,
  },
  {
    name: 'If-Match',
    description:
      'Changes or deletes the resource only if its ETag is still this one (or any, with *); otherwise 412 and nothing changes',
    schema: { type: 'string' },
    operations: ['updateTask', 'deleteTask', 'updateSkill', 'deleteSkill', 'updateSource', 'deleteSource'],
  },
  {
    name: 'If-None-Match',
    description: 'Answers 304 with no body while the resource still has this ETag',
    schema: { type: 'string' },
    operations: ['getTask', 'getSkill', 'getSource', 'getRun', 'getModel'],
  },
];

/**
 * Errors any operation can answer whatever its route declares: 500 for a fault of the server,
 * 503 while the database is unreachable or the process shuts down; in the API-key area also 401
 * (before the route is found) and 429 (the rate limit, counted before authentication).
 */
const COMMON_ERRORS: readonly { status: number; operations: Operations }[] = [
  { status: 401, operations: 'api-key' },
  { status: 429, operations: 'api-key' },
  { status: 500, operations: 'all' },
  { status: 503, operations: 'all' },
];

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Bad request: invalid JSON or input that fails validation (details name each failed field)',
  401: 'Missing or invalid credentials',
  403: 'Forbidden: a plan limit or a rule of the organization refuses it',
  404: 'Not found (or not of the key’s organization)',
  409: 'Conflict with the current state of the resource',
  413: 'Request body over the size limit (1 MiB)',
  415: 'Request body is not application/json',
  429: 'Rate limit exceeded; see Retry-After',
  500: 'Internal error; the response carries the request id to quote',
  503: 'Unavailable: the database is unreachable, the service is shutting down, or a feature is not configured',
};

interface Operation {
  operationId?: string;
  parameters?: unknown[];
  security?: unknown[];
  responses?: Record<string, { description?: string; headers?: Record<string, unknown>; content?: unknown }>;
}

// biome-ignore lint/suspicious/noExplicitAny: the document is plain JSON built by @fastify/swagger
type Doc = Record<string, any>;

const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

function applies(operations: Operations, path: string, op: Operation): boolean {
  if (operations === 'all') return true;
  if (operations === 'api-key') return path.startsWith('/api/svc/') && (op.security?.length ?? 1) > 0;
  return op.operationId !== undefined && operations.includes(op.operationId);
}

/** By operationId, the statuses whose response schema is a named resource, and its name. */
export type NamedResponses = Map<string, Record<string, string>>;

/**
 * Adds the common errors, the error descriptions and the response headers to every operation,
 * and makes each named response schema a reference to its component.
 */
export function completeDocument(doc: Doc, named: NamedResponses = new Map()): Doc {
  doc.components ??= {};
  doc.components.schemas ??= {};
  doc.components.headers = Object.fromEntries(
    RESPONSE_HEADERS.map((h) => [
      h.name,
      { description: h.description, required: h.required, schema: h.schema },
    ]),
  );
  for (const [path, item] of Object.entries<Record<string, Operation>>(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(item)) {
      if (!HTTP_METHODS.has(method)) continue;
      op.responses ??= {};
      const responses = op.responses;
      for (const h of REQUEST_HEADERS) {
        if (!op.operationId || !h.operations.includes(op.operationId)) continue;
        op.parameters ??= [];
        op.parameters.push({
          in: 'header',
          name: h.name,
          required: false,
          description: h.description,
          schema: h.schema,
        });
        if (h.name === 'If-None-Match') {
          responses[304] ??= {
            description: 'Not modified: the resource still has the If-None-Match tag',
            headers: { ETag: { $ref: '#/components/headers/ETag' } },
          };
        }
      }
      for (const { status, operations } of COMMON_ERRORS) {
        if (applies(operations, path, op)) {
          responses[status] ??= {
            content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
          };
        }
      }
      for (const [status, response] of Object.entries(responses)) {
        const code = Number(status);
        const name = op.operationId && named.get(op.operationId)?.[status];
        const content = response.content as Record<string, { schema?: unknown }> | undefined;
        const json = content?.['application/json'];
        if (name && json?.schema) {
          doc.components.schemas[name] ??= json.schema;
          json.schema = { $ref: `#/components/schemas/${name}` };
        }
        if (code >= 400 && (!response.description || response.description === 'Default Response')) {
          response.description = ERROR_DESCRIPTIONS[code] ?? 'Error';
        }
        for (const h of RESPONSE_HEADERS) {
          if (!applies(h.operations, path, op)) continue;
          if (h.statuses !== 'all' && !h.statuses.includes(code)) continue;
          response.headers = { ...response.headers, [h.name]: { $ref: `#/components/headers/${h.name}` } };
        }
      }
    }
  }
  return doc;
}
