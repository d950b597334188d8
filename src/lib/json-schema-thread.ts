// The thread that compiles a user's JSON Schema and, when given one, validates an output
// against it (lib/json-schema-check.ts starts it and stops it at its time limit). Nothing here
// is trusted: a schema can make compiling or validating slow (nested references, a pattern
// that backtracks), which only this thread pays for.
import { parentPort, workerData } from 'node:worker_threads';
import { newUntrustedSchemaAjv } from './ajv.ts';

/** What the thread answers (after `started`, once). */
export type ThreadAnswer =
  | { kind: 'started' }
  | { kind: 'ok' }
  | { kind: 'bad_schema'; message: string }
  | { kind: 'not_json'; message: string }
  | { kind: 'mismatch'; path: string; message: string };

const post = (answer: ThreadAnswer) => parentPort?.postMessage(answer);
const { schema, output } = workerData as { schema: object; output?: string };

post({ kind: 'started' });
const ajv = newUntrustedSchemaAjv();
let validate: ReturnType<typeof ajv.compile> | undefined;
try {
  validate = ajv.compile(schema);
} catch (err) {
  post({ kind: 'bad_schema', message: err instanceof Error ? err.message : String(err) });
}
if (validate && output === undefined) post({ kind: 'ok' });
else if (validate && output !== undefined) {
  let value: unknown;
  let parsed = false;
  try {
    value = JSON.parse(output);
    parsed = true;
  } catch (err) {
    post({ kind: 'not_json', message: err instanceof Error ? err.message : String(err) });
  }
  if (parsed) {
    if (validate(value)) post({ kind: 'ok' });
    else {
      const first = validate.errors?.[0];
      post({ kind: 'mismatch', path: first?.instancePath || '/', message: first?.message ?? 'is invalid' });
    }
  }
}
