import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

// The limits and the role matrix stand both in docs/api.md (what each answer looks like) and in
// docs/security.md (what an operator reviews). They are copies: this keeps them from drifting.

const read = (name: string) => readFileSync(new URL(`../docs/${name}`, import.meta.url), 'utf8');

/** The rows of the first Markdown table after `heading`, as trimmed cells (padding ignored). */
function tableAfter(markdown: string, heading: string): string[][] {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `no heading "${heading}"`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    const text = line.trim();
    if (text.startsWith('|')) {
      rows.push(
        text
          .slice(1, -1)
          .split('|')
          .map((cell) => cell.trim().replaceAll('](#', '](api.md#')),
      );
    } else if (rows.length > 0) break;
  }
  assert.ok(rows.length > 2, `no table after "${heading}"`);
  return rows.filter((row) => !row.every((cell) => /^-+$/.test(cell)));
}

describe('the docs state every bound and role in the same words', () => {
  const api = read('api.md');
  const security = read('security.md');

  test('the limits table of security.md is the one of api.md', () => {
    assert.deepEqual(tableAfter(security, '## Limits'), tableAfter(api, '## Limits'));
  });

  test('the per-organization caps of security.md are those of api.md', () => {
    const caps = (md: string) => tableAfter(md.slice(md.indexOf('## Limits')), '### Per-organization caps');
    assert.deepEqual(caps(security), caps(api));
  });

  test('the role matrix of security.md is the one of api.md', () => {
    assert.deepEqual(tableAfter(security, '## Roles'), tableAfter(api, '## People'));
  });

  test('every configuration variable a limit names is in the operations guide', () => {
    const operations = read('operations.md');
    const named = new Set(
      tableAfter(api, '## Limits').flatMap((row) => row.join(' ').match(/SVC_[A-Z_]+/g) ?? []),
    );
    assert.ok(named.size > 3, 'the limits name their variables');
    for (const name of named)
      assert.ok(operations.includes(`\`${name}\``), `${name} is not in docs/operations.md`);
  });
});
