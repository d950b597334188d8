// The contract test reads the spec's facts from test/spec-facts.json, the project's own data. Where
// the interface specification itself sits beside the project (../shared/spec/), this test keeps
// the two equal; in a clone without it there is nothing to compare and the test says so.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  factsOfMarkdown,
  loadSpec,
  readSpecFacts,
  SPEC_MARKDOWN_URL,
  specFacts,
} from './helpers/spec-facts.ts';
import { parseSpec } from './helpers/spec-tables.ts';

const markdownPath = fileURLToPath(SPEC_MARKDOWN_URL);
const beside = existsSync(markdownPath);
const absent = `no interface specification at ${markdownPath}: nothing to compare test/spec-facts.json with`;

describe('the spec facts the contract test reads', () => {
  test('test/spec-facts.json reads back as the very facts it was written from', () => {
    const facts = readSpecFacts();
    assert.deepEqual(specFacts(loadSpec()), facts);
    assert.ok(Object.keys(facts.resources).length > 0, 'the file holds resources');
    assert.ok(facts.endpoints.length > 0, 'the file holds endpoints');
  });

  test('test/spec-facts.json holds exactly the facts of the interface specification beside the project', (t) => {
    if (!beside) {
      t.skip(absent);
      return;
    }
    const markdown = readFileSync(markdownPath, 'utf8');
    assert.deepEqual(
      readSpecFacts(),
      factsOfMarkdown(markdown),
      'test/spec-facts.json differs from the spec: run `npm run spec-facts`, review the file and commit it',
    );
    assert.deepEqual(loadSpec(), parseSpec(markdown));
  });

  test('the comparison notices a field the spec gained, one it lost, a changed enum and a changed required-ness', (t) => {
    if (!beside) {
      t.skip(absent);
      return;
    }
    const markdown = readFileSync(markdownPath, 'utf8');
    const committed = readSpecFacts();
    const edits: [string, RegExp, string][] = [
      ['a gained field', /^(\| prompt \| .*)$/m, '$1\n| mood | string | opt | |'],
      ['a lost field', /^\| prompt \| .*\n/m, ''],
      ['a changed enum', /`completed`/, '`finished`'],
      ['a changed required-ness', /^(\| prompt \| string \| )req/m, '$1opt'],
    ];
    for (const [what, pattern, replacement] of edits) {
      assert.match(markdown, pattern, `the spec has the line ${what} edits`);
      assert.notDeepEqual(factsOfMarkdown(markdown.replace(pattern, replacement)), committed, what);
    }
  });
});
