// npm test: the suite under node's test runner, two files at a time, and beside it the tests in
// test/realtime/, which wait on the real clock for a whole minute to come round. They use next
// to no CPU while they wait; in one of the two places they would hold back the rest of the
// suite for up to a minute. Both runs must pass.
//
// With arguments (files, --test-name-pattern=...) it is a single run of node's test runner
// over every test file with those arguments added, as `node --test` alone would be.
import { spawn } from 'node:child_process';
import { globSync } from 'node:fs';

const REALTIME_DIR = 'test/realtime/';
const all = globSync('test/**/*.test.ts').sort();
const realtime = all.filter((f) => f.startsWith(REALTIME_DIR));
const rest = all.filter((f) => !f.startsWith(REALTIME_DIR));
const extra = process.argv.slice(2);

function nodeTest(args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--test', '--test-reporter=spec', ...args], { stdio: 'inherit' });
    child.on('error', () => resolve(1));
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

const codes =
  extra.length > 0
    ? [await nodeTest(['--test-concurrency=2', ...extra, ...all])]
    : await Promise.all([
        nodeTest(['--test-concurrency=2', ...rest]),
        realtime.length > 0 ? nodeTest(realtime) : 0,
      ]);
process.exitCode = codes.find((c) => c !== 0) ?? 0;
