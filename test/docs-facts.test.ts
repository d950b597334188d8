import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ERROR_STATUS } from '../src/lib/errors.ts';
import { createMetrics } from '../src/lib/metrics.ts';
import { codeSpans, readDoc, sectionOf, tableAfter } from './helpers/markdown.ts';

// The facts of the docs that the code states too: which migrations, channels, error codes,
// metrics, files and tests exist. Prose can say anything; these cannot drift from the code.

const root = fileURLToPath(new URL('..', import.meta.url));

/** Every file below `dir` (relative to the repository), as repository-relative paths. */
function filesBelow(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

/**
 * The paths of the layout block of architecture.md: an entry is a name (or names separated by
 * commas) at an indent of two spaces per level under the last directory (`name/`) above it;
 * deeper-indented lines continue a description.
 */
function layoutPaths(architecture: string): string[] {
  const block = sectionOf(architecture, '## Layout').split('```')[1];
  assert.ok(block, 'the layout section holds a code block');
  const parents: string[] = [];
  const paths: string[] = [];
  for (const line of block.split('\n')) {
    const indent = line.length - line.trimStart().length;
    const entry = /^((?:[\w.-]+\/?)(?:, [\w.-]+\/?)*)(?:\s|$)/.exec(line.trimStart());
    if (!entry?.[1] || indent % 2 !== 0 || indent > 2 * parents.length) continue;
    parents.length = indent / 2;
    for (const name of entry[1].split(', ')) paths.push([...parents, name].join(''));
    if (entry[1].endsWith('/')) parents.push(entry[1]);
  }
  return paths;
}

/** The channels the code sends or listens on: `'svc_…'` literals where a notify, listen or
 * channel is named on the same line. */
function channelsInCode(): Set<string> {
  const channels = new Set<string>();
  for (const file of filesBelow('src').filter((f) => f.endsWith('.ts'))) {
    for (const line of readFileSync(join(root, file), 'utf8').split('\n')) {
      if (!/notify|listen|channel/i.test(line)) continue;
      for (const m of line.matchAll(/'(svc_[a-z_]+)'/g)) channels.add(m[1] as string);
    }
  }
  return channels;
}

describe('the docs state what the code holds', () => {
  const architecture = readDoc('architecture.md');

  test('architecture.md lists every migration file, and each one it lists exists', () => {
    const listed = layoutPaths(architecture).filter((p) => /^migrations\/.+\.sql$/.test(p));
    const files = filesBelow('migrations').filter((f) => f.endsWith('.sql'));
    assert.ok(files.length > 10, 'the migrations are found');
    assert.deepEqual(listed.sort(), files.sort());
  });

  test('every path in the layout of architecture.md exists', () => {
    const paths = layoutPaths(architecture);
    assert.ok(paths.length > 100, 'the layout is parsed');
    const missing = paths.filter((p) => !existsSync(join(root, p)));
    assert.deepEqual(missing, [], 'named in the layout, absent from the tree');
  });

  test('the layout of architecture.md names every source file', () => {
    const paths = new Set(layoutPaths(architecture));
    // A directory with no entries of its own below it (pages/, channels/) is described whole.
    const whole = [...paths].filter(
      (p) => p.endsWith('/') && ![...paths].some((q) => q !== p && q.startsWith(p)),
    );
    const unnamed = filesBelow('src').filter((f) => !paths.has(f) && !whole.some((dir) => f.startsWith(dir)));
    assert.deepEqual(unnamed, [], 'source files the layout does not name');
  });

  test('the notification channels table names every channel the code uses, and only those', () => {
    const inCode = channelsInCode();
    assert.ok(inCode.size >= 5, 'the channels are found in the code');
    const table = tableAfter(architecture, '### Notification channels');
    assert.equal(table[0]?.[0], 'channel');
    const documented = table.slice(1).map((row) => (row[0] ?? '').replaceAll('`', ''));
    assert.deepEqual(documented.toSorted(), [...inCode].sort());
  });

  test('the background parts table names every file that builds a Loop, and only channels the code uses', () => {
    const table = tableAfter(architecture, '### Background parts');
    assert.deepEqual(table[0]?.slice(0, 2), ['part', 'file']);
    const column = (name: string) =>
      table.slice(1).flatMap((row) => codeSpans(row[table[0]?.indexOf(name) ?? -1] ?? ''));
    const loops = filesBelow('src').filter(
      (f) => f.endsWith('.ts') && readFileSync(join(root, f), 'utf8').includes('new Loop('),
    );
    assert.ok(loops.length >= 4, 'the loops are found');
    const documented = column('file');
    assert.deepEqual(
      loops.filter((f) => !documented.some((d) => f === `src/${d}`)),
      [],
      'files that build a Loop and are not in the table',
    );
    const inCode = channelsInCode();
    assert.deepEqual(
      column('wake-up channel').filter((c) => !inCode.has(c)),
      [],
    );
  });

  test('every NOTIFY or LISTEN the docs name is on a channel the code uses', () => {
    const inCode = channelsInCode();
    for (const name of ['architecture.md', 'api.md', 'operations.md', 'security.md', '../README.md']) {
      for (const m of readDoc(name).matchAll(/(?:NOTIFY|LISTEN)\s+`?(svc_\w+)/g)) {
        assert.ok(inCode.has(m[1] as string), `${name} names a channel the code does not use: ${m[0]}`);
      }
    }
  });

  test('the error-code table of api.md is the catalogue of src/lib/errors.ts, with its statuses', () => {
    const table = tableAfter(readDoc('api.md'), 'detail. The status follows from the code:');
    assert.deepEqual(table[0]?.slice(0, 2), ['code', 'status']);
    const documented = Object.fromEntries(
      table.slice(1).map((row) => [(row[0] ?? '').replaceAll('`', ''), Number(row[1])]),
    );
    assert.deepEqual(documented, { ...ERROR_STATUS });
  });

  test('the metrics table of operations.md names every metric the service exports, and only those', async () => {
    const table = tableAfter(readDoc('operations.md'), 'Metrics:');
    const patterns = table
      .slice(1)
      .flatMap((row) => codeSpans(row[0] ?? ''))
      .map((name) => new RegExp(`^${name.replaceAll('*', '.+')}$`));
    const exported = (await createMetrics().registry.getMetricsAsJSON()).map((m) => m.name);
    for (const name of exported)
      assert.ok(
        patterns.some((p) => p.test(name)),
        `${name} is not in the metrics table`,
      );
    for (const pattern of patterns)
      assert.ok(
        exported.some((name) => pattern.test(name)),
        `${pattern} is in the metrics table, not exported`,
      );
  });

  test('the dependency tables of architecture.md name every package of package.json, and only those', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    const documented = (heading: string) =>
      tableAfter(architecture, heading)
        .slice(1)
        .flatMap((row) => codeSpans(row[0] ?? ''))
        .sort();
    assert.deepEqual(documented('Runtime (`dependencies`):'), Object.keys(pkg.dependencies).sort());
    assert.deepEqual(documented('Development (`devDependencies`):'), Object.keys(pkg.devDependencies).sort());
  });

  test('every test file a heading of security.md names exists', () => {
    const tests = new Set(filesBelow('test').map((f) => f.split('/').pop()));
    const headings = readDoc('security.md')
      .split('\n')
      .filter((line) => line.startsWith('#'));
    const named = headings.flatMap(codeSpans).filter((span) => span.endsWith('.test.ts'));
    assert.ok(named.length > 20, 'the headings name their tests');
    assert.deepEqual(
      named.filter((name) => !tests.has(name)),
      [],
    );
  });

  test('security.md names every adversarial test', () => {
    const security = readDoc('security.md');
    const adversarial = filesBelow('test/adversarial')
      .filter((f) => f.endsWith('.test.ts'))
      .map((f) => f.split('/').pop() as string);
    assert.ok(adversarial.length > 20, 'the adversarial tests are found');
    assert.deepEqual(
      adversarial.filter((name) => !security.includes(`\`${name}\``)),
      [],
    );
  });

  test('every npm script the docs run is in package.json', () => {
    const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    for (const name of [
      'architecture.md',
      'api.md',
      'operations.md',
      'security.md',
      'benchmarks.md',
      '../README.md',
    ]) {
      for (const m of readDoc(name).matchAll(/npm run ([\w:-]+)/g))
        assert.ok((m[1] as string) in scripts, `${name} runs a script package.json lacks: ${m[0]}`);
    }
  });

  test('every file the docs name in backticks exists', () => {
    const topLevel = readdirSync(root, { withFileTypes: true }).filter((entry) => entry.isFile());
    const tracked = [
      ...['src', 'test', 'migrations', 'docs', 'scripts', 'bench'].flatMap(filesBelow),
      ...topLevel.map((entry) => entry.name),
      '.ci/run',
    ];
    const basenames = new Set(tracked.map((f) => f.split('/').pop()));
    const exists = (span: string) =>
      span.includes('/') ? tracked.some((f) => `/${f}`.endsWith(`/${span}`)) : basenames.has(span);
    for (const name of ['architecture.md', 'api.md', 'operations.md', 'security.md', '../README.md']) {
      const named = codeSpans(readDoc(name)).filter(
        // A file of the repository: a known extension, no placeholder (NNNN), not a URL path
        // and not outside the repository (../shared).
        (span) => /^\w[\w./-]*\.(ts|sql|json|md)$/.test(span) && !span.includes('NNNN'),
      );
      assert.deepEqual(
        named.filter((span) => !exists(span)),
        [],
        `files ${name} names that are not in the tree`,
      );
    }
  });
});
