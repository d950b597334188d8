// npm test: the suite under node's test runner, two files at a time, and beside it the tests in
// test/realtime/, which wait on the real clock for a whole minute to come round. They use next
// to no CPU while they wait; in one of the two places they would hold back the rest of the
// suite for up to a minute. Both runs must pass.
//
// With arguments it is a single run of node's test runner: test files among them are the files
// run (`npm test -- test/tasks.test.ts`), else every test file; other arguments
// (--test-name-pattern=..., --test-only) are passed on.
import { spawn } from 'node:child_process';
import { globSync } from 'node:fs';
import { resolve } from 'node:path';

const REALTIME_DIR = 'test/realtime/';

/**
 * The files that take longest (measured on a 2-core machine), started first: the runner takes
 * files in the order given, and a long file started last would leave one of the two places idle
 * while it finishes alone. The rest follow in name order.
 */
const LONGEST_FIRST = [
  'test/adversarial/faults.test.ts',
  'test/adversarial/embedded-durability.test.ts',
  'test/cli.test.ts',
  'test/adversarial/faults-outage.test.ts',
  'test/adversarial/lost-wakeup.test.ts',
  'test/adversarial/usage-chaos.test.ts',
  'test/adversarial/secrets.test.ts',
  'test/processes.test.ts',
  'test/adversarial/dashboard-strict.test.ts',
  'test/adversarial/org-caps.test.ts',
  'test/worker.test.ts',
  'test/admin.test.ts',
  'test/run-execution.test.ts',
];

const all = globSync('test/**/*.test.ts').sort();
const realtime = all.filter((f) => f.startsWith(REALTIME_DIR));
const rest = all.filter((f) => !f.startsWith(REALTIME_DIR));
const ordered = [
  ...LONGEST_FIRST.filter((f) => rest.includes(f)),
  ...rest.filter((f) => !LONGEST_FIRST.includes(f)),
];
const args = process.argv.slice(2);
const files = args.filter((a) => a.endsWith('.test.ts'));
const flags = args.filter((a) => !a.endsWith('.test.ts'));

// Every test file is a process of its own, and so is every service a test starts as a child:
// each would compile the same sources and dependencies again (about 0.6 s of CPU each). Node's
// compile cache keeps the compiled code on disk for all of them; it changes no behaviour.
process.env.NODE_COMPILE_CACHE ??= resolve('node_modules/.cache/node-compile-cache');

function nodeTest(args: string[]): Promise<number> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--test', '--test-reporter=spec', ...args], { stdio: 'inherit' });
    child.on('error', () => done(1));
    child.on('exit', (code, signal) => done(code ?? (signal ? 1 : 0)));
  });
}

const codes =
  args.length > 0
    ? [await nodeTest(['--test-concurrency=2', ...flags, ...(files.length > 0 ? files : all)])]
    : await Promise.all([
        nodeTest(['--test-concurrency=2', ...ordered]),
        realtime.length > 0 ? nodeTest(realtime) : 0,
      ]);
process.exitCode = codes.find((c) => c !== 0) ?? 0;
