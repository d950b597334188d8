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

/**
 * A validator for JSON Schemas written by users (a task's `outputSchema`), built from the same
 * setup with safer options: refs are compiled as calls, never inlined (inlining copies a
 * referenced schema at each use, so a small schema could compile into megabytes of code);
 * nothing is added to the data (no defaults, no coercion); the first problem ends validation;
 * schemas compiled are not kept in the instance. No schema is ever loaded from elsewhere (there
 * is no `loadSchema`), so a remote `$ref` does not compile. Compile and validate such schemas
 * only in a thread with a time limit (lib/json-schema-check.ts): a schema can make either slow.
 */
export function newUntrustedSchemaAjv(): Ajv {
  return addFormats(
    new Ajv({
      ...COMMON,
      allErrors: false,
      useDefaults: false,
      coerceTypes: false,
      inlineRefs: false,
      addUsedSchema: false,
      // An unknown format is ignored, as strict: false says, without a line on the console.
      logger: false,
    }),
  );
}
