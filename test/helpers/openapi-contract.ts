import assert from 'node:assert/strict';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { SpecField, SpecType } from './spec-tables.ts';

// ajv-formats is CommonJS: under ESM its default import is the plugin function itself.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export type Schema = Record<string, any>;
export type OpenApiDocument = {
  paths: Record<string, Record<string, any>>;
  components?: any;
  security?: Record<string, unknown>[];
};

export const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const COMPONENTS_BASE = 'https://contract.test/openapi.json';

/** Follows `#/components/...` references of the document. */
export function deref(doc: OpenApiDocument, schema: Schema | undefined): Schema | undefined {
  let s = schema;
  for (let hops = 0; s?.$ref && hops < 20; hops++) {
    const pointer = String(s.$ref);
    assert.ok(pointer.startsWith('#/'), `only local references are expected, got ${pointer}`);
    s = pointer
      .slice(2)
      .split('/')
      .reduce<any>((node, part) => node?.[part.replaceAll('~1', '/').replaceAll('~0', '~')], doc);
    assert.ok(s, `${pointer} resolves in the document`);
  }
  return s;
}

/** The operations of the document whose path starts with `prefix`, as "METHOD /path". */
export function operationsUnder(doc: OpenApiDocument, prefix: string): string[] {
  return Object.entries(doc.paths)
    .filter(([path]) => path.startsWith(prefix))
    .flatMap(([path, item]) =>
      Object.keys(item)
        .filter((m) => METHODS.includes(m))
        .map((m) => `${m.toUpperCase()} ${path}`),
    );
}

/** The JSON schema of a response, or of a request body, or undefined when the document declares none. */
export function responseSchema(doc: OpenApiDocument, method: string, path: string, status: number) {
  const op = doc.paths[path]?.[method];
  assert.ok(op, `${method.toUpperCase()} ${path} is in the document`);
  const response = deref(doc, op.responses?.[String(status)]);
  assert.ok(response, `${method.toUpperCase()} ${path} declares ${status}`);
  return deref(doc, response.content?.['application/json']?.schema);
}

export function requestBodySchema(doc: OpenApiDocument, method: string, path: string): Schema {
  const op = doc.paths[path]?.[method];
  assert.ok(op, `${method.toUpperCase()} ${path} is in the document`);
  const schema = deref(doc, deref(doc, op.requestBody)?.content?.['application/json']?.schema);
  assert.ok(schema, `${method.toUpperCase()} ${path} declares a JSON request body`);
  return schema;
}

/** Where the document carries a resource: an operation ("GET /path"), a status, a path into the schema. */
export interface Location {
  op: string;
  /** The first 2xx of the operation when not given. */
  status?: number;
  at?: string[];
}

export const splitOperation = (op: string) => {
  const [method, path] = op.split(' ') as [string, string];
  return { method: method.toLowerCase(), path };
};

export const hasOperation = (doc: OpenApiDocument, op: string) => {
  const { method, path } = splitOperation(op);
  return doc.paths[path]?.[method] !== undefined;
};

export function schemaAt(doc: OpenApiDocument, loc: Location): Schema | undefined {
  const { method, path } = splitOperation(loc.op);
  const status =
    loc.status ?? Number(Object.keys(doc.paths[path]?.[method]?.responses ?? {}).find((s) => /^2/.test(s)));
  let schema = responseSchema(doc, method, path, status);
  for (const key of loc.at ?? []) schema = deref(doc, schema?.[key]);
  return schema;
}

/**
 * Checks every response it is shown against the document: the status must be declared for the
 * operation, and the body must validate against the declared schema (or be empty when the
 * response declares no content). Remembers the statuses it has seen per operation.
 */
export class ResponseContract {
  /** "METHOD /path" to the statuses checked for it. */
  readonly seen = new Map<string, Set<number>>();
  private readonly ajv: Ajv2020;
  private readonly validators = new Map<string, ValidateFunction | null>();
  private readonly templates: { path: string; pattern: RegExp; literals: number }[];
  private readonly doc: OpenApiDocument;

  constructor(doc: OpenApiDocument) {
    this.doc = doc;
    this.ajv = addFormats(new Ajv2020({ strict: true, allErrors: true, validateFormats: true }));
    this.ajv.addVocabulary(['example', 'xml', 'externalDocs']);
    // The document's components, each under its own absolute id so `#/components/...` can be rewritten.
    for (const [name, schema] of Object.entries<Schema>(doc.components?.schemas ?? {})) {
      this.ajv.addSchema(this.rebase(schema), `${COMPONENTS_BASE}#/components/schemas/${name}`);
    }
    this.templates = Object.keys(doc.paths).map((path) => {
      const segments = path.split('/');
      const pattern = segments.map((s) =>
        /^\{.+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^$()|[\]\\]/g, '\\$&'),
      );
      return {
        path,
        pattern: new RegExp(`^${pattern.join('/')}$`),
        literals: segments.filter((s) => !s.startsWith('{')).length,
      };
    });
  }

  private rebase(schema: Schema): Schema {
    return JSON.parse(
      JSON.stringify(schema, (key, value) =>
        key === '$ref' && typeof value === 'string' && value.startsWith('#/components/')
          ? `${COMPONENTS_BASE}${value}`
          : value,
      ),
    );
  }

  /** The document path a concrete URL belongs to (the most literal match wins). */
  templateOf(url: string): string {
    const path = url.split('?')[0] as string;
    const matches = this.templates
      .filter((t) => t.pattern.test(path))
      .sort((a, b) => b.literals - a.literals);
    assert.ok(matches[0], `${path} matches a path of the OpenAPI document`);
    return matches[0].path;
  }

  private validator(method: string, path: string, status: number): ValidateFunction | null {
    const key = `${method} ${path} ${status}`;
    if (!this.validators.has(key)) {
      const schema = responseSchema(this.doc, method, path, status);
      this.validators.set(key, schema ? this.ajv.compile(this.rebase(schema)) : null);
    }
    return this.validators.get(key) ?? null;
  }

  check(methodName: string, url: string, res: { status: number; headers: any; body: unknown; raw: string }) {
    const method = methodName.toLowerCase();
    const path = this.templateOf(url);
    const operation = this.doc.paths[path]?.[method];
    const op = `${method.toUpperCase()} ${path}`;
    const where = `${method.toUpperCase()} ${url} -> ${res.status}`;
    assert.ok(operation, `${op} is an operation of the document (${where})`);
    this.seen.set(op, (this.seen.get(op) ?? new Set()).add(res.status));
    const declared = Object.keys(operation.responses ?? {});
    assert.ok(
      declared.includes(String(res.status)),
      `${where}: status ${res.status} is not declared (declared: ${declared.join(', ')}); body ${res.raw}`,
    );
    const validate = this.validator(method, path, res.status);
    if (!validate) {
      assert.equal(res.raw, '', `${where}: the document declares no body, but one was sent`);
      return;
    }
    assert.match(String(res.headers['content-type']), /^application\/json/, `${where}: JSON content type`);
    assert.ok(
      validate(res.body),
      `${where}: the body does not match the declared schema:\n${JSON.stringify(validate.errors, null, 2)}\nbody: ${res.raw}`,
    );
  }
}

/* ------------------------------------------------------------------------------------------- */
/* The document's schemas against the spec's field tables.                                      */

export interface FieldCheckOptions {
  /** Resource name to its spec fields (for `array of Skill`, `Source config`, ...). */
  resources: Map<string, SpecField[]>;
  /** Request bodies: optional fields may take null (PATCH null clears a field, per the docs). */
  nullClearsOptional?: boolean;
}

const describeType = (t: SpecType): string =>
  t.kind === 'array'
    ? `array of ${describeType(t.items)}`
    : t.kind === 'string' && t.format
      ? `string (${t.format})`
      : t.kind === 'enum'
        ? `enum ${t.values.join(', ')}`
        : t.kind === 'resource'
          ? t.name
          : t.kind;

/**
 * Whether a schema may or must accept null: `required` where the spec says "or null" (or a note
 * gives null a meaning), `allowed` for optional request fields (PATCH null clears a field, per
 * the project's docs), `forbidden` otherwise.
 */
export type NullRule = 'required' | 'allowed' | 'forbidden';

/** Splits a schema into its alternatives (`anyOf`, `oneOf`, `type: [...]`). */
function alternatives(doc: OpenApiDocument, schema: Schema): Schema[] {
  const s = deref(doc, schema) ?? {};
  const branches = s.anyOf ?? s.oneOf;
  if (branches) return branches.flatMap((b: Schema) => alternatives(doc, b));
  if (Array.isArray(s.type)) return s.type.map((type: string) => ({ ...s, type }));
  return [s];
}

const sameSet = (a: unknown[], b: unknown[]) =>
  a.length === b.length && [...a].sort().join('\u0000') === [...b].sort().join('\u0000');

/** Problems of one schema against one spec type; empty when compatible. */
export function typeProblems(
  doc: OpenApiDocument,
  schema: Schema,
  type: SpecType,
  nulls: NullRule,
  where: string,
  options: FieldCheckOptions,
): string[] {
  const branches = alternatives(doc, schema);
  const nonNull = branches.filter((b) => b.type !== 'null');
  const allowsNull = nonNull.length < branches.length;
  const problems: string[] = [];
  if (allowsNull && nulls === 'forbidden') problems.push(`${where}: allows null, the spec does not`);
  if (!allowsNull && nulls === 'required')
    problems.push(`${where}: the spec allows null, the schema does not`);
  if (nonNull.length === 0) problems.push(`${where}: has no non-null type`);
  for (const s of nonNull) {
    const wrong = (what: string) => problems.push(`${where}: expected ${describeType(type)}, ${what}`);
    switch (type.kind) {
      case 'string':
        if (s.type !== 'string') wrong(`got type ${s.type}`);
        else if (type.format && s.format !== type.format) wrong(`got format ${s.format ?? '(none)'}`);
        break;
      case 'number':
        if (s.type !== 'number' && s.type !== 'integer') wrong(`got type ${s.type}`);
        break;
      case 'boolean':
        if (s.type !== 'boolean') wrong(`got type ${s.type}`);
        break;
      case 'enum':
        if (s.type !== 'string') wrong(`got type ${s.type}`);
        else if (!Array.isArray(s.enum) || !sameSet(s.enum, type.values))
          wrong(`got enum ${s.enum?.join(', ') ?? '(none)'}`);
        break;
      case 'array':
        if (s.type !== 'array' || !s.items) wrong(`got type ${s.type}`);
        else problems.push(...typeProblems(doc, s.items, type.items, 'forbidden', `${where}[]`, options));
        break;
      case 'object':
        if (s.type !== 'object') wrong(`got type ${s.type}`);
        else if (type.fields) problems.push(...fieldProblems(doc, s, type.fields, where, options));
        break;
      case 'map': {
        const values = [
          ...(typeof s.additionalProperties === 'object' ? [s.additionalProperties] : []),
          ...Object.values<Schema>(s.patternProperties ?? {}),
        ];
        if (s.type !== 'object' || values.length === 0) wrong('got no schema for the values');
        for (const v of values)
          problems.push(...typeProblems(doc, v, type.values, 'forbidden', `${where}{}`, options));
        break;
      }
      case 'any':
        for (const k of ['type', 'enum', 'const', 'properties', 'items', 'not'])
          if (k in s) wrong(`the schema restricts it with "${k}"`);
        break;
      case 'resource': {
        const fields = options.resources.get(type.name);
        if (!fields) problems.push(`${where}: the spec has no resource ${type.name}`);
        else if (s.type !== 'object') wrong(`got type ${s.type}`);
        else problems.push(...fieldProblems(doc, s, fields, where, options));
        break;
      }
      case 'unknown':
        problems.push(`${where}: the spec's type "${type.text}" is not understood by the contract test`);
        break;
    }
  }
  return problems;
}

/**
 * Problems of an object schema against spec fields: each field must be a property with a
 * compatible type; 'req' fields must be required, optional ones must not. Extra properties are fine.
 */
export function fieldProblems(
  doc: OpenApiDocument,
  objectSchema: Schema,
  fields: SpecField[],
  where: string,
  options: FieldCheckOptions,
): string[] {
  const s = deref(doc, objectSchema) ?? {};
  const problems: string[] = [];
  if (s.type !== 'object') return [`${where}: is not an object schema`];
  const required: string[] = s.required ?? [];
  for (const field of fields) {
    const at = `${where}.${field.name}`;
    const property = s.properties?.[field.name];
    if (!property) {
      problems.push(`${at}: missing from the document`);
      continue;
    }
    if (field.required && !required.includes(field.name)) problems.push(`${at}: the spec requires it`);
    if (!field.required && required.includes(field.name))
      problems.push(`${at}: required, the spec has it optional`);
    const nulls: NullRule = field.nullable
      ? 'required'
      : options.nullClearsOptional && !field.required
        ? 'allowed'
        : 'forbidden';
    problems.push(...typeProblems(doc, property, field.type, nulls, at, options));
    for (const bound of ['minimum', 'maximum'] as const) {
      const value = field[bound];
      if (value === undefined) continue;
      const schemas = alternatives(doc, property).filter((b) => b.type !== 'null');
      if (!schemas.every((b) => b[bound] === value)) problems.push(`${at}: ${bound} is not ${value}`);
    }
  }
  return problems;
}
