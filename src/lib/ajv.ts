// The one Ajv setup. The JSON API's validators (http/plugins/validation.ts) and the dashboard's
// form checks (web/page-kit.ts) compile the same TypeBox schemas, so they must agree on the
// options and formats; the model catalog file (domain/models.ts) is checked the same way. Each
// caller still gets its own instance, because a compiled schema stays in its instance's cache
// for the instance's life.
import { Ajv, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS: under ESM its default import is the plugin function itself.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const COMMON: Options = { allErrors: true, useDefaults: true, removeAdditional: false, strict: false };

/**
 * A validator for one kind of input. `json` (request bodies, forms made into bodies) keeps types
 * exactly: a number where a string belongs is a problem, not silently coerced. `text` (query
 * strings, path parameters) is text by nature, so it is coerced to the schema's types.
 */
export function newAjv(input: 'json' | 'text'): Ajv {
  return addFormats(new Ajv({ ...COMMON, coerceTypes: input === 'json' ? false : 'array' }));
}
