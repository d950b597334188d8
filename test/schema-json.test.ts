// The JSON schemas that every process validates its configuration and its model catalog with
// (scripts/schema-json.ts writes them from the TypeBox schemas, so that processes without the
// api role do not load TypeBox; test/config-docs.test.ts and test/models.test.ts check what
// they accept and refuse).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { renderSchema, SCHEMA_FILES } from '../scripts/schema-json.ts';

test('each committed JSON schema is the TypeBox schema it is written from', () => {
  assert.deepEqual(
    SCHEMA_FILES.map((f) => f.file),
    ['src/config/env-schema.json', 'src/domain/models-catalog.schema.json'],
  );
  for (const { file, schema } of SCHEMA_FILES) {
    const committed: unknown = JSON.parse(readFileSync(new URL(`../${file}`, import.meta.url), 'utf8'));
    assert.deepEqual(
      committed,
      JSON.parse(renderSchema(schema)),
      `${file} differs from its schema: run \`npm run schema-json\` and commit the result`,
    );
  }
});
