import { Ajv, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { App } from '../types.ts';

// ajv-formats is CommonJS: under ESM its default import is the plugin function itself.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const common: Options = { allErrors: true, useDefaults: true, removeAdditional: false, strict: false };

/**
 * Two validators: request bodies are JSON and keep their types exactly (a number where a
 * string belongs is a 400, not silently coerced); query strings and path parameters are text,
 * so they are coerced to the schema's types.
 */
export function installValidators(app: App): void {
  const bodyAjv = addFormats(new Ajv({ ...common, coerceTypes: false }));
  const textAjv = addFormats(new Ajv({ ...common, coerceTypes: 'array' }));
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object),
  );
}
