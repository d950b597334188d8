// An OpenAPI 3.x document into tools: one per operation, its path and query parameters and
// JSON body as the tool's arguments. Only JSON documents are read (YAML would need a parser
// this service does not carry; an API that only serves YAML gets the generic http_request
// tool). The document's `servers` are not looked at: requests always go to the source's
// baseUrl (see api-source.ts).
import type { ToolDefinition } from './types.ts';

/** Model APIs take a bounded number of tools (OpenAI: 128); operations past it are left out. */
export const MAX_API_TOOLS = 128;
const MAX_NAME = 64;
const MAX_DESCRIPTION = 1_000;
/** `$ref`s are inlined to this depth; deeper or recursive ones become an open schema. */
const MAX_REF_DEPTH = 8;
/** Nodes one tool's input schema may hold after inlining, so shared refs cannot blow it up. */
const SCHEMA_NODE_BUDGET = 5_000;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

type JsonObject = Record<string, unknown>;
const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Where an argument of a tool goes in the request. */
interface ParamBinding {
  key: string;
  name: string;
  in: 'path' | 'query';
}

export interface ApiOperation {
  tool: ToolDefinition;
  method: Uppercase<(typeof METHODS)[number]>;
  /** The path template of the document, e.g. `/items/{id}`. */
  path: string;
  params: ParamBinding[];
  /** The argument that holds the JSON body, when the operation takes one. */
  bodyKey?: string;
  required: string[];
}

export type OpenApiDocument = JsonObject & { paths: JsonObject };

/** Whether a parsed JSON value is an OpenAPI 3.x document with paths. */
export function isOpenApi3(doc: unknown): doc is OpenApiDocument {
  return (
    isObject(doc) && typeof doc.openapi === 'string' && doc.openapi.startsWith('3.') && isObject(doc.paths)
  );
}

/** Follows a local JSON pointer (`#/components/...`); own properties only, so no prototype keys. */
function resolvePointer(doc: JsonObject, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    } catch {
      return undefined;
    }
    if (!isObject(node) && !Array.isArray(node)) return undefined;
    if (!Object.hasOwn(node, key)) return undefined;
    node = (node as JsonObject)[key];
  }
  return node;
}

/** A parameter, request body or path item that may be a `$ref` to one (a few hops at most). */
function deref(doc: JsonObject, value: unknown): JsonObject | undefined {
  let node = value;
  for (let hop = 0; hop < 5 && isObject(node) && typeof node.$ref === 'string'; hop++) {
    node = resolvePointer(doc, node.$ref);
  }
  return isObject(node) && typeof node.$ref !== 'string' ? node : undefined;
}

/** A schema with its local `$ref`s inlined: bounded in depth and size, safe against cycles. */
function inlineSchema(
  doc: JsonObject,
  schema: unknown,
  budget: { nodes: number },
  refs: string[] = [],
): unknown {
  if (--budget.nodes < 0) return {};
  if (Array.isArray(schema)) return schema.map((item) => inlineSchema(doc, item, budget, refs));
  if (!isObject(schema)) return schema;
  const { $ref, ...rest } = schema;
  const out: JsonObject = {};
  if (typeof $ref === 'string') {
    const target =
      refs.includes($ref) || refs.length >= MAX_REF_DEPTH ? undefined : resolvePointer(doc, $ref);
    if (isObject(target)) Object.assign(out, inlineSchema(doc, target, budget, [...refs, $ref]));
    else out.description = `a value as described by ${$ref}`;
  }
  for (const [key, value] of Object.entries(rest)) out[key] = inlineSchema(doc, value, budget, refs);
  return out;
}

const sanitizeName = (raw: string) =>
  raw
    .replace(/[^a-zA-Z0-9_-]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, MAX_NAME);

/** `base`, or `base_2`, `base_3`… whichever is free, within MAX_NAME characters. */
function uniqueName(base: string, taken: Set<string>): string {
  let name = base;
  for (let n = 2; taken.has(name); n++) name = `${base.slice(0, MAX_NAME - `_${n}`.length)}_${n}`;
  taken.add(name);
  return name;
}

/** The schema of a parameter (`schema`, or the one of its first `content` entry). */
function paramSchema(param: JsonObject): unknown {
  if (param.schema !== undefined) return param.schema;
  const first = isObject(param.content) ? Object.values(param.content)[0] : undefined;
  return isObject(first) && first.schema !== undefined ? first.schema : { type: 'string' };
}

/** The JSON media type of a request body (application/json first, then any `+json` type). */
function jsonMedia(content: unknown): JsonObject | undefined {
  if (!isObject(content)) return undefined;
  const key =
    Object.keys(content).find((k) => /^application\/json\b/i.test(k)) ??
    Object.keys(content).find((k) => /json/i.test(k));
  const media = key === undefined ? undefined : content[key];
  return isObject(media) ? media : undefined;
}

function operationTool(
  doc: JsonObject,
  method: (typeof METHODS)[number],
  path: string,
  item: JsonObject,
  op: JsonObject,
  toolNames: Set<string>,
): ApiOperation {
  // Operation parameters override path-level ones of the same name and place.
  const byPlace = new Map<string, JsonObject>();
  for (const list of [item.parameters, op.parameters]) {
    if (!Array.isArray(list)) continue;
    for (const raw of list) {
      const param = deref(doc, raw);
      if (param && typeof param.name === 'string' && (param.in === 'path' || param.in === 'query')) {
        byPlace.set(`${param.in}:${param.name}`, param);
      }
    }
  }
  const budget = { nodes: SCHEMA_NODE_BUDGET };
  const keys = new Set<string>();
  const properties: JsonObject = {};
  const required: string[] = [];
  const params: ParamBinding[] = [];
  for (const param of byPlace.values()) {
    const name = param.name as string;
    const place = param.in as 'path' | 'query';
    const key = uniqueName(sanitizeName(name) || place, keys);
    const schema = inlineSchema(doc, paramSchema(param), budget);
    properties[key] =
      isObject(schema) && typeof param.description === 'string' && schema.description === undefined
        ? { ...schema, description: param.description }
        : schema;
    if (place === 'path' || param.required === true) required.push(key);
    params.push({ key, name, in: place });
  }
  const notes: string[] = [];
  let bodyKey: string | undefined;
  const requestBody = deref(doc, op.requestBody);
  if (requestBody) {
    const media = jsonMedia(requestBody.content);
    if (media) {
      bodyKey = uniqueName('body', keys);
      const schema = inlineSchema(doc, media.schema ?? {}, budget);
      properties[bodyKey] = isObject(schema) ? { description: 'JSON request body', ...schema } : schema;
      if (requestBody.required === true) required.push(bodyKey);
    } else if (isObject(requestBody.content)) {
      notes.push(`Its ${Object.keys(requestBody.content).join(', ')} request body is not supported here.`);
    }
  }
  const text = [op.summary, op.description].filter(
    (t): t is string => typeof t === 'string' && t.trim() !== '',
  );
  const description = [...new Set(text)].join('\n\n').slice(0, MAX_DESCRIPTION);
  const upper = method.toUpperCase() as ApiOperation['method'];
  const rawName = typeof op.operationId === 'string' ? op.operationId : '';
  const name = uniqueName(
    sanitizeName(rawName) || sanitizeName(`${method}_${path.replace(/^\/+/, '')}`) || method,
    toolNames,
  );
  const inputSchema: JsonObject = { type: 'object', properties };
  if (required.length > 0) inputSchema.required = required;
  return {
    tool: {
      name,
      description: [description, `${upper} ${path}`, ...notes].filter(Boolean).join('\n\n'),
      inputSchema,
    },
    method: upper,
    path,
    params,
    ...(bodyKey === undefined ? {} : { bodyKey }),
    required,
  };
}

/** The operations of a document as tools, in document order, at most MAX_API_TOOLS. */
export function operationsFromOpenApi(doc: OpenApiDocument): ApiOperation[] {
  const operations: ApiOperation[] = [];
  const toolNames = new Set<string>();
  for (const [path, rawItem] of Object.entries(doc.paths)) {
    const item = deref(doc, rawItem);
    if (!item || !path.startsWith('/')) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (!isObject(op)) continue;
      if (operations.length >= MAX_API_TOOLS) return operations;
      operations.push(operationTool(doc, method, path, item, op, toolNames));
    }
  }
  return operations;
}

const asParamText = (value: unknown): string =>
  typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);

export type OperationRequest =
  | { ok: true; path: string; query: Array<[string, string]>; body?: unknown }
  | { ok: false; message: string };

/** The request of a tool call: the path with its parameters filled in, the query, the body. */
export function operationRequest(op: ApiOperation, args: Record<string, unknown>): OperationRequest {
  const missing = op.required.filter((key) => args[key] === undefined || args[key] === null);
  if (missing.length > 0)
    return { ok: false, message: `missing required argument(s): ${missing.join(', ')}` };
  let path = op.path;
  const query: Array<[string, string]> = [];
  for (const param of op.params) {
    const value = args[param.key];
    if (value === undefined || value === null) continue;
    if (param.in === 'path') {
      const text = asParamText(value);
      // An empty or dot segment would name another resource (`/items/` or `/` for `/items/{id}`).
      if (text === '' || text === '.' || text === '..') {
        return { ok: false, message: `path parameter ${param.key} must not be empty, . or ..` };
      }
      path = path.split(`{${param.name}}`).join(encodeURIComponent(text));
    } else
      for (const item of Array.isArray(value) ? value : [value]) query.push([param.name, asParamText(item)]);
  }
  const left = /\{[^}]*\}/.exec(path);
  if (left) return { ok: false, message: `the document declares no parameter for ${left[0]} in ${op.path}` };
  const body = op.bodyKey === undefined ? undefined : args[op.bodyKey];
  return { ok: true, path, query, ...(body === undefined ? {} : { body }) };
}
