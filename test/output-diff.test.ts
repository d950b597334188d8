// The unified diff a deliverOn `change` delivery carries: what `diff -u` would show, and bounded
// in size and in work whatever the two outputs are.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_DIFF_CHARS, unifiedDiff } from '../src/delivery/diff.ts';

const lines = (n: number, f: (i: number) => string) =>
  `${Array.from({ length: n }, (_, i) => f(i)).join('\n')}\n`;

describe('output diff', () => {
  test('changes far apart make separate hunks with three lines of context each', () => {
    const before = lines(20, (i) => `line ${i + 1}`);
    const after = before.replace('line 2\n', 'line two\n').replace('line 18\n', 'line 18\nline 18b\n');
    const { diff, truncated } = unifiedDiff({ runId: 'a', output: before }, { runId: 'b', output: after });
    assert.equal(truncated, false);
    assert.equal(
      diff,
      [
        '--- run a',
        '+++ run b',
        '@@ -1,5 +1,5 @@',
        ' line 1',
        '-line 2',
        '+line two',
        ' line 3',
        ' line 4',
        ' line 5',
        '@@ -16,5 +16,6 @@',
        ' line 16',
        ' line 17',
        ' line 18',
        '+line 18b',
        ' line 19',
        ' line 20',
        '',
      ].join('\n'),
    );
  });

  test('an output that was empty is all added', () => {
    assert.equal(
      unifiedDiff({ runId: 'a', output: '' }, { runId: 'b', output: 'new\n' }).diff,
      '--- run a\n+++ run b\n@@ -0,0 +1 @@\n+new\n',
    );
  });

  test(`a diff longer than ${MAX_DIFF_CHARS} characters is cut at a line's end and says so`, () => {
    const before = lines(3000, (i) => `old line ${i} ${'x'.repeat(20)}`);
    const after = lines(3000, (i) => `new line ${i} ${'y'.repeat(20)}`);
    const { diff, truncated } = unifiedDiff({ runId: 'a', output: before }, { runId: 'b', output: after });
    assert.equal(truncated, true);
    assert.ok(diff.length <= MAX_DIFF_CHARS, String(diff.length));
    assert.ok(diff.endsWith('\n'));
    // 3000 x 3000 lines apart is past the matching bound: removed whole, then added whole.
    assert.ok(
      diff.startsWith('--- run a\n+++ run b\n@@ -1,3000 +1,3000 @@\n-old line 0 '),
      diff.slice(0, 80),
    );
  });
});
