/**
 * Reads the environment against EnvSchema: each variable's text is turned into its type (a
 * whole number, a boolean, a URL) and the result is validated against the schema by Ajv (the
 * validator every process has loaded already: lib/ajv.ts; TypeBox's own checker, typebox/value,
 * would add some 300 modules to every process for this one check). The first problem becomes a
 * ConfigError whose one line names the variable, the way the service reports it at start.
 *
 * The schema is read as JSON (env-schema.json, written from schema.ts by `npm run schema-json`;
 * test/schema-json.test.ts keeps the two equal): TypeBox's builders are some 370 modules, about
 * 10 MB of a process's memory, that a scheduler or worker process needs for nothing else
 * (docs/architecture.md, "Lazy roles").
 */
import { readFileSync } from 'node:fs';
import type { ValidateFunction } from 'ajv';
import type { TSchema } from 'typebox';
import { newAjv } from '../lib/ajv.ts';
import type { Env, EnvSchema } from './schema.ts';

const envSchema = JSON.parse(
  readFileSync(new URL('./env-schema.json', import.meta.url), 'utf8'),
) as typeof EnvSchema;

export class ConfigError extends Error {
  constructor(variable: string, problem: string, options?: ErrorOptions) {
    super(`invalid configuration: ${variable} ${problem}`, options);
    this.name = 'ConfigError';
  }
}

export type RawEnv = Record<string, string | undefined>;

/** The annotations of a variable's schema (see schema.ts) as plain data. */
interface VariableSchema {
  type?: string;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  protocols?: string[];
  lowercase?: boolean;
}

/** An empty or blank value counts as unset, so `NAME=` in a file never means "the empty string". */
function rawValue(env: RawEnv, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function decode(name: string, schema: VariableSchema, env: RawEnv): unknown {
  let raw = rawValue(env, name);
  if (raw === undefined) return schema.default;
  if (schema.lowercase || schema.type === 'boolean') raw = raw.toLowerCase();
  if (schema.type === 'integer') {
    if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
    return Number(raw);
  }
  if (schema.type === 'boolean') {
    if (['true', '1', 'yes'].includes(raw)) return true;
    if (['false', '0', 'no'].includes(raw)) return false;
    throw new ConfigError(name, `must be true or false, got "${raw}"`);
  }
  if (schema.protocols) {
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch (cause) {
      throw new ConfigError(name, 'must be a URL', { cause });
    }
    if (!schema.protocols.includes(parsed.protocol)) {
      throw new ConfigError(name, `must use ${schema.protocols.join(' or ')}`);
    }
    return raw.replace(/\/+$/, '');
  }
  return raw;
}

/** The words for a value the schema refused, in the form the service has always used. */
function problem(
  schema: VariableSchema,
  keyword: string,
  params: Record<string, unknown>,
  value: unknown,
): string {
  switch (keyword) {
    case 'minimum':
    case 'maximum':
      return `must be between ${schema.minimum} and ${schema.maximum}, got ${value}`;
    case 'minLength':
      return `must be at least ${params.limit} characters`;
    case 'enum':
      return `must be one of ${(params.allowedValues as unknown[]).join(', ')}`;
    default:
      return `is invalid (${keyword})`;
  }
}

/** EnvSchema's checker, compiled at the first read (tests read the environment many times). */
let checkEnv: ValidateFunction | undefined;

/** Parses and validates every variable of EnvSchema; throws the first problem as a ConfigError. */
export function readEnv(env: RawEnv): Env {
  const values: Record<string, unknown> = {};
  const properties: Record<string, TSchema> = envSchema.properties;
  for (const [name, schema] of Object.entries(properties)) {
    const value = decode(name, schema as VariableSchema, env);
    if (value !== undefined) values[name] = value;
  }
  checkEnv ??= newAjv('json').compile(envSchema);
  const error = checkEnv(values) ? undefined : checkEnv.errors?.[0];
  if (error) {
    const name = error.instancePath.slice(1);
    const schema = (properties[name] ?? {}) as VariableSchema;
    throw new ConfigError(
      name,
      problem(schema, error.keyword, error.params as Record<string, unknown>, values[name]),
    );
  }
  return values as Env;
}
