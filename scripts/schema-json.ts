/**
 * Writes, as JSON, the TypeBox schemas that every process validates with: the environment's
 * (src/config/schema.ts) and the model catalog file's (src/schemas/model-catalog.ts). A process
 * reads these files instead of building the schemas, so that one without the api role (a
 * scheduler or a worker) never loads TypeBox's builders, some 370 modules and about 10 MB of its
 * memory (docs/architecture.md, "Lazy roles"). test/schema-json.test.ts fails when a committed
 * file differs from its schema.
 *
 *   npm run schema-json
 */
import { writeFileSync } from 'node:fs';
import { EnvSchema } from '../src/config/schema.ts';
import { CatalogFile } from '../src/schemas/model-catalog.ts';

/** Each schema with the file it is written to, relative to the repository's root. */
export const SCHEMA_FILES: readonly { file: string; schema: unknown }[] = [
  { file: 'src/config/env-schema.json', schema: EnvSchema },
  { file: 'src/domain/models-catalog.schema.json', schema: CatalogFile },
];

export function renderSchema(schema: unknown): string {
  return `${JSON.stringify(schema, null, 2)}\n`;
}

if (import.meta.main) {
  const root = new URL('../', import.meta.url);
  for (const { file, schema } of SCHEMA_FILES) writeFileSync(new URL(file, root), renderSchema(schema));
}
