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
export const RESPONSE_HEADERS: readonly ResponseHeader[] = [
  { name: 'X-Request-Id', description: "The request's id, as in the logs (the caller's own X-Request-Id when it is a plain token of up to 128 characters)", schema: { type: 'string', maxLength: 128 }, required: true, operations: 'all', statuses: 'all' },
  { name: 'X-RateLimit-Limit', description: "Requests the organization may make per one-minute window (per client address without a valid key)", schema: INTEGER, required: true, operations: 'api-key', statuses: 'all' },
  { name: 'X-RateLimit-Remaining', description: 'Requests left in the current window', schema: INTEGER, required: true, operations: 'api-key', statuses: 'all' },
  { name: 'X-RateLimit-Reset', description: 'When the current window ends, in Unix epoch seconds', schema: INTEGER, required: true, operations: 'api-key', statuses: 'all' },
  { name: 'Retry-After', description: 'Seconds to wait before retrying: always on 429, on 503 when the wait is known', schema: { type: 'integer', minimum: 1 }, required: false, operations: 'all', statuses: [429, 503] },
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
