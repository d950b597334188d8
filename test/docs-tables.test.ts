import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readDoc, tableAfter as tableOf } from './helpers/markdown.ts';

// The limits and the role matrix stand both in docs/api.md (what each answer looks like) and in
// docs/security.md (what an operator reviews). They are copies: this keeps them from drifting.

/** A table of api.md or security.md, its links within the page written as links to api.md. */
const tableAfter = (markdown: string, heading: string): string[][] =>
  tableOf(markdown, heading).map((row) => row.map((cell) => cell.replaceAll('](#', '](api.md#')));

describe('the docs state every bound and role in the same words', () => {
  const api = readDoc('api.md');
  const security = readDoc('security.md');

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
    const operations = readDoc('operations.md');
    const named = new Set(
      tableAfter(api, '## Limits').flatMap((row) => row.join(' ').match(/SVC_[A-Z_]+/g) ?? []),
    );
    assert.ok(named.size > 3, 'the limits name their variables');
    for (const name of named)
      assert.ok(operations.includes(`\`${name}\``), `${name} is not in docs/operations.md`);
  });
});
