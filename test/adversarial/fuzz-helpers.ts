// Request generators for the fuzz suite: values made from the OpenAPI document's schemas, then
// corrupted on purpose. Values that are expensive to print (100 kB strings, 20,000-item arrays)
// or that only exist at run time (the ids of fixtures) are small marker objects, expanded when
// the request is sent, so that fast-check's counterexamples stay short and replayable.
import fc from 'fast-check';
import { deref, type OpenApiDocument, type Schema } from '../helpers/openapi-contract.ts';

/** JSON text spliced into a body as is: numbers JSON.stringify cannot write (-0, 1e309, 2^53+1, NaN). */
export class RawJson {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  [fc.toStringMethod]() {
    return `RawJson(${this.text})`;
  }
}

/** A long string, `unit` repeated `count` times. */
export class Huge {
  readonly unit: string;
  readonly count: number;
  constructor(unit: string, count: number) {
    this.unit = unit;
    this.count = count;
  }
  value(): string {
    return this.unit.repeat(this.count);
  }
  [fc.toStringMethod]() {
    return `Huge(${JSON.stringify(this.unit)} x ${this.count})`;
  }
}

/** A long array of one item. */
export class HugeArray {
  readonly item: Json;
  readonly count: number;
  constructor(item: Json, count: number) {
    this.item = item;
    this.count = count;
  }
  [fc.toStringMethod]() {
    return `HugeArray(${fc.stringify(this.item)} x ${this.count})`;
  }
}

/** A value of the running service (an id of a fixture, a key), looked up when the request is sent. */
export class Ref {
  readonly name: string;
  readonly upper: boolean;
  constructor(name: string, upper = false) {
    this.name = name;
    this.upper = upper;
  }
  [fc.toStringMethod]() {
    return `Ref(${this.name}${this.upper ? ', upper' : ''})`;
  }
}

/** Text already percent-encoded for a URL (path segment or query value), used as is. */
export class Encoded {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  [fc.toStringMethod]() {
    return `Encoded(${JSON.stringify(this.text.length > 80 ? `${this.text.slice(0, 80)}...` : this.text)})`;
  }
}

export type Json =
  | null
  | boolean
  | number
  | string
  | Json[]
  | { [key: string]: Json }
  | RawJson
  | Huge
  | HugeArray
  | Ref;

export type Resolve = (ref: Ref) => string;

const isPlainObject = (v: unknown): v is Record<string, Json> =>
  typeof v === 'object' &&
  v !== null &&
  !Array.isArray(v) &&
  (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);

/** The JSON text of a generated value (own `__proto__` keys are written like any other key). */
export function toJsonText(value: Json, resolve: Resolve): string {
  if (value instanceof RawJson) return value.text;
  if (value instanceof Huge) return JSON.stringify(value.value());
  if (value instanceof Ref) return JSON.stringify(resolve(value));
  if (value instanceof HugeArray) {
    const item = toJsonText(value.item, resolve);
    return `[${new Array(value.count).fill(item).join(',')}]`;
  }
  if (Array.isArray(value)) return `[${value.map((v) => toJsonText(v, resolve)).join(',')}]`;
  if (isPlainObject(value)) {
    const entries = Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${toJsonText(value[k] as Json, resolve)}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** A copy of `obj` with `key` set, as an own property even for `__proto__`. */
export function withKey(obj: Record<string, Json>, key: string, value: Json): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const k of Object.keys(obj)) {
    if (k !== key) Object.defineProperty(out, k, { value: obj[k], enumerable: true, writable: true });
  }
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  return out;
}

function without(obj: Record<string, Json>, key: string): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const k of Object.keys(obj)) {
    if (k !== key) Object.defineProperty(out, k, { value: obj[k], enumerable: true, writable: true });
  }
  return out;
}

/* ------------------------------------------------------------------------------------------- */
/* Hostile values.                                                                              */

const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\uD800',
  'x\uDFFFy',
  '\uDC00\uD800',
  '😀𝒳𐍈',
  '\u202Eevil\u202C.txt',
  'مرحبا بالعالم',
  'שלום',
  '\uFEFFbom',
  '\u200B',
  'e\u0301\u0301\u0301',
  '\r\nX-Injected: 1',
  'NaN',
  'Infinity',
  '-0',
  '1e308',
  '9007199254740993',
  '-1',
  'null',
  'true',
  'undefined',
  '{}',
  '[]',
  "'; DROP TABLE tasks; --",
  '%00',
  '%s%s%s%n',
  '\u0024{jndi:ldap://127.0.0.1/a}',
  '{{constructor.constructor}}',
  '<script>alert(1)</script>',
  '../../etc/passwd',
  'javascript:alert(1)',
  'http://127.0.0.1:1/',
  'http://[::1]:9/',
  'http://169.254.169.254/latest/meta-data',
  'file:///etc/passwd',
  'ws://127.0.0.1:9/',
  'mailto:a@b',
  '00000000-0000-0000-0000-000000000000',
  'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
  '2024-02-30T25:61:00Z',
  '0000-00-00T00:00:00Z',
  '275760-09-13T00:00:00.001Z',
  '24:00',
  '+00000000000000000000',
  'a@b',
  '@',
  'unlimited',
  '__proto__',
];

const HOSTILE_NUMBERS = [
  '-0',
  '0',
  '-1',
  '1.5',
  '1e308',
  '1e309',
  '-1e309',
  '9007199254740993',
  '-9007199254740993',
  '2147483648',
  '4294967296',
  '123456789012345678901234567890',
  '1E2',
  '0.1e-400',
  '5e-324',
  'NaN',
  'Infinity',
];

/** Long strings: 100 kB and more of one character, some with astral or NUL characters. */
const HUGE_STRINGS = [
  new Huge('x', 100_001),
  new Huge('😀', 60_000),
  new Huge('\u0000', 50_000),
  new Huge('é', 200_000),
  new Huge('a', 1_100_000),
];

/** Characters of valid text: ASCII, any printable grapheme, astral, right-to-left, zero-width, combining. */
const textUnit = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...'abcxyzABC019 -_./:@') },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: fc.constantFrom('😀', '𝒳', '\u202E', 'ש', 'é', '\u200B', '\u0301') },
);

/** As textUnit, with NUL, lone surrogates and odd separators too. */
const hostileUnit = fc.oneof(
  { weight: 3, arbitrary: textUnit },
  { weight: 1, arbitrary: fc.constantFrom('\u0000', '\uD800', '\uDFFF', '\uFFFF', '\u0085', '\u2028') },
);

/** Any value of the wrong kind: types, edge numbers, hostile and enormous text, odd nesting. */
export const hostileValue: fc.Arbitrary<Json> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom<Json>(null, true, false, 0, -1, 1.5, [], {}, [null], [[[]]], { a: { b: {} } }),
  },
  { weight: 5, arbitrary: fc.constantFrom<Json>(...HOSTILE_STRINGS) },
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_NUMBERS).map((t): Json => new RawJson(t)) },
  { weight: 2, arbitrary: fc.constantFrom<Json>(...HUGE_STRINGS) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<Json>(
      new HugeArray('x', 20_000),
      new HugeArray(null, 20_000),
      new RawJson(`${'['.repeat(2000)}${']'.repeat(2000)}`),
    ),
  },
  { weight: 2, arbitrary: fc.string({ unit: hostileUnit, maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.integer({ min: -(2 ** 31), max: 2 ** 31 }) },
);

const EXTRA_KEYS = [
  'extra',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'id',
  'organizationId',
  'createdAt',
  'status',
  'isAdmin',
  '',
  ' ',
  'NAME',
  '\u0000',
  '😀',
  'a'.repeat(300),
  '$where',
];

/* ------------------------------------------------------------------------------------------- */
/* Values from a schema.                                                                        */

export interface GenContext {
  doc: OpenApiDocument;
  /**
   * Arbitraries by property name for what the schema cannot say (a catalog model, a timezone,
   * an id that exists). Items of an array property are looked up as `name[]`, keys of a map as
   * `name{}`.
   */
  hints: Record<string, fc.Arbitrary<Json>>;
  /** Values for object schemas whose fields depend on each other; undefined to build it field by field. */
  shape?: (schema: Schema) => fc.Arbitrary<Json> | undefined;
}

const UNIQUE_URLS = [
  'https://example.com/hook',
  'http://127.0.0.1:9/mcp',
  'https://api.example.com/v1',
  'http://localhost:1/',
  'https://example.com/a?b=c#d',
];

function stringValue(s: Schema): fc.Arbitrary<Json> {
  const min = s.minLength ?? 0;
  const max = Math.max(min, Math.min(s.maxLength ?? 40, 40));
  const fits = (v: string) => [...v].length >= min && [...v].length <= (s.maxLength ?? Infinity);
  if (s.format === 'uuid') return fc.uuid();
  if (s.format === 'email') return fc.emailAddress().filter((v) => v.length <= (s.maxLength ?? 320));
  if (s.format === 'date-time') {
    return fc
      .date({
        min: new Date('1970-01-01T00:00:00Z'),
        max: new Date('2100-01-01T00:00:00Z'),
        noInvalidDate: true,
      })
      .map((d) => d.toISOString());
  }
  if (s.format === 'uri') return fc.constantFrom(...UNIQUE_URLS);
  if (typeof s.pattern === 'string') {
    return fc.stringMatching(new RegExp(s.pattern)).filter(fits);
  }
  return fc.string({ unit: textUnit, minLength: Math.max(min, 0), maxLength: max }).filter(fits);
}

/** The properties an object schema (or any branch of a union) names. */
function propertiesOf(doc: OpenApiDocument, schema: Schema): Record<string, Schema> {
  const s = deref(doc, schema) ?? {};
  const branches: Schema[] = s.anyOf ?? s.oneOf ?? [];
  return Object.assign({}, ...branches.map((b) => propertiesOf(doc, b)), s.properties ?? {});
}

/** A value the schema accepts (most of the time: business rules may still refuse it). */
export function validValue(
  ctx: GenContext,
  schema: Schema | undefined,
  name = '',
  depth = 0,
): fc.Arbitrary<Json> {
  const hint = name ? ctx.hints[name] : undefined;
  if (hint) return hint;
  const s = deref(ctx.doc, schema) ?? {};
  if (depth > 6) return fc.constant(null);
  const shaped = ctx.shape?.(s);
  if (shaped) return shaped;
  const branches: Schema[] | undefined = s.anyOf ?? s.oneOf;
  if (branches) return fc.oneof(...branches.map((b) => validValue(ctx, b, name, depth)));
  if (Array.isArray(s.enum)) return fc.constantFrom<Json>(...s.enum);
  if ('const' in s) return fc.constant(s.const as Json);
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return fc.integer({ min: s.minimum ?? -1000, max: s.maximum ?? 1_000_000 });
    case 'number':
      return fc.double({
        min: s.minimum ?? -1e6,
        max: s.maximum ?? 1e6,
        noNaN: true,
        noDefaultInfinity: true,
      });
    case 'string':
      return stringValue(s);
    case 'array': {
      const item = validValue(ctx, s.items, `${name}[]`, depth + 1);
      const constraints = { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 4, 4) };
      return s.uniqueItems
        ? fc.uniqueArray(item, { ...constraints, selector: (v) => fc.stringify(v) })
        : fc.array(item, constraints);
    }
    case 'object': {
      const props: Record<string, Schema> = s.properties ?? {};
      const model: Record<string, fc.Arbitrary<Json>> = {};
      for (const [k, p] of Object.entries(props)) model[k] = validValue(ctx, p, k, depth + 1);
      const required = (s.required ?? []).filter((k: string) => k in props);
      // The required fields and a few optional ones: every optional field is one more chance for
      // a business rule to refuse the value before the handler does its work.
      const optional = Object.keys(props).filter((k) => !required.includes(k));
      const record = fc
        .subarray(optional, { maxLength: Math.min(4, optional.length) })
        .chain((keys) =>
          fc.record(
            Object.fromEntries([...required, ...keys].map((k) => [k, model[k] as fc.Arbitrary<Json>])),
          ),
        ) as fc.Arbitrary<Record<string, Json>>;
      if (typeof s.additionalProperties !== 'object') return record;
      const key = ctx.hints[`${name}{}`] ?? fc.string({ minLength: 1, maxLength: 10 });
      const values = fc.dictionary(
        key.map((k) => String(k)),
        validValue(ctx, s.additionalProperties, '', depth + 1),
        { maxKeys: 3 },
      );
      return fc.tuple(record, values).map(([r, d]) => ({ ...d, ...r }));
    }
    default:
      return fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>;
  }
}

/** `value` with one thing wrong: a field of the wrong kind, a field missing, a field too many, ... */
export function mutate(
  ctx: GenContext,
  schema: Schema | undefined,
  value: Json | undefined,
  depth = 0,
): fc.Arbitrary<Json> {
  const s = deref(ctx.doc, schema) ?? {};
  const options: fc.Arbitrary<Json>[] = [hostileValue];
  if (isPlainObject(value)) {
    const props = propertiesOf(ctx.doc, s);
    const keys = [...new Set([...Object.keys(props), ...Object.keys(value)])];
    if (keys.length > 0) {
      const replaced = fc
        .constantFrom(...keys)
        .chain((k) =>
          (depth < 4 ? mutate(ctx, props[k], value[k], depth + 1) : hostileValue).map((v) =>
            withKey(value, k, v),
          ),
        );
      options.push(replaced, replaced);
    }
    const present = Object.keys(value);
    if (present.length > 0) options.push(fc.constantFrom(...present).map((k) => without(value, k)));
    options.push(
      fc.tuple(fc.constantFrom(...EXTRA_KEYS), hostileValue).map(([k, v]) => withKey(value, k, v)),
    );
  } else if (Array.isArray(value)) {
    if (value.length > 0) {
      options.push(
        fc
          .nat(value.length - 1)
          .chain((i) =>
            mutate(ctx, s.items, value[i], depth + 1).map((v) => value.map((x, j) => (j === i ? v : x))),
          ),
        fc.constant([...value, value[0] as Json]),
      );
    }
    options.push(fc.constant(new HugeArray(value[0] ?? 'x', 20_000)));
  }
  return fc.oneof(...options);
}

/* ------------------------------------------------------------------------------------------- */
/* URL parts.                                                                                   */

/** Path segments that are not ids: empty, numbers, too long, other types of text, bad escapes. */
export const HOSTILE_SEGMENTS: Encoded[] = [
  '',
  'null',
  'undefined',
  '0',
  '-1',
  '-0',
  '1e308',
  'NaN',
  '9007199254740993',
  'true',
  '%7B%7D',
  'x'.repeat(101),
  'x'.repeat(5000),
  '%F0%9F%98%80',
  '%E2%80%AE',
  '%00',
  '%ED%A0%80',
  '%FF%FE',
  '%',
  '%zz',
  '%2F',
  '%2e%2e',
  '..',
  '.',
  'a%20b',
  '*',
  '%27%3B%20DROP%20TABLE%20tasks%3B--',
  '00000000-0000-0000-0000-000000000000',
  '00000000000000000000000000000000',
  '%7B00000000-0000-0000-0000-000000000000%7D',
  '%2000000000-0000-0000-0000-000000000000',
  '00000000-0000-0000-0000-0000000000000',
  'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz',
].map((t) => new Encoded(t));

/** Query values that are not what a parameter wants. */
export const HOSTILE_QUERY_VALUES: Encoded[] = [
  '',
  '-1',
  '0',
  '-0',
  '101',
  '1e308',
  '1e2',
  '2.5',
  'NaN',
  'Infinity',
  '9007199254740993',
  '0x10',
  '%20',
  '+1',
  '%2B1',
  'true',
  'null',
  '%00',
  '%ED%A0%80',
  '%F0%9F%98%80',
  '%E2%80%AE',
  '%',
  '%zz',
  'skills,skills',
  'skills,sources,skills',
  'SKILLS',
  '00000000-0000-0000-0000-000000000000',
  'x'.repeat(20_000),
  '%27%20OR%201%3D1--',
].map((t) => new Encoded(t));

/** Extra query text: unknown names, empty pairs, bad escapes. */
export const HOSTILE_QUERY_TAILS = [
  '&',
  '&&',
  '&=',
  '&=x',
  '&a',
  '&extra=1',
  '&__proto__=1',
  '&constructor=x',
  '&organizationId',
  '&limit=',
  '&limit[]=1',
  '&%',
  '&%zz=1',
  '&x=%ED%A0%80',
];
