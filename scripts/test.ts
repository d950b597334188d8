// npm test: the suite under node's test runner, in a few processes that each run a batch of test
// files one after another (node's --test-isolation=none), two batches at a time (three on PostgreSQL), and beside them
// the tests in test/realtime/, which wait on the real clock for a whole minute to come round.
// They use next to no CPU while they wait; in one of the two places they would hold back the
// rest of the suite for up to a minute. Every run must pass.
//
// Why batches: a test file in a process of its own loads the sources and dependencies again
// (about 0.6 s of CPU with the compile cache) and compiles PGlite's WebAssembly again (about
// 1 s; PGlite keeps the compiled module for the process), over 70 times. A batch pays that once.
// The files of a batch run one at a time (node runs the tests of an isolation-none process in
// sequence), so two batches at a time keep the two places busy as two files at a time did.
// Measured with /usr/bin/time around `npm test` on the idle 2-core machine, PGlite, the same
// 1,634 tests, warm compile cache, back to back: a process per file (two at a time) took 339 s
// wall and 576 s of CPU (user + system); in batches 247 s and 393 s (-27% wall, -32% CPU). Four
// batches at a time (8 batches) took 236 s but 419 s of CPU: within the noise in wall, so two.
// PostgreSQL, the same way but with the machine busy with other work (load average 6 to 13):
// 441 s wall and 248 s of CPU per file, 439 s and 190 s in batches (-23% CPU; the batched run
// under the heavier load; the server's own CPU is not in these figures).
// Earlier, on the machine shared with other work (1,597 tests): 1,075 s of CPU against 794 s on
// PGlite, 633 s against 475 s on PostgreSQL (the server's own CPU is not in these figures).
//
// With arguments it is a single run of node's test runner: test files among them are the files
// run, each in its own process (`npm test -- test/tasks.test.ts`), else every test file; other
// arguments (--test-name-pattern=..., --test-only) are passed on. `npm test -- --test-randomize`
// (or --test-random-seed=N) is the whole suite in batches with every batch's tests shuffled:
// a test that depends on another's order, in its file or in its batch, shows up there.
import { spawn } from 'node:child_process';
import { globSync } from 'node:fs';
import { resolve } from 'node:path';

const REALTIME_DIR = 'test/realtime/';

/**
 * Batches (and files kept alone) run at a time. On PostgreSQL the server does part of the work
 * in processes of its own, so a third batch keeps the two cores busy: measured on the idle 2-core
 * machine, the same 1,641 tests took 252 s with two at a time and 216 s with three (a process per
 * file: 274 s). On PGlite the database runs inside each batch's process: two.
 */
const LANES = process.env.TEST_DATABASE_URL ? 3 : 2;

/**
 * Files that keep a process of their own, and why. Everything else shares a process with other
 * files, so a file must leave the process as it found it: no process-wide hooks or settings left
 * behind, services and child processes closed, `process.env` restored, and no top-level
 * `before`/`after` (in a shared process they run once around the whole batch: wrap the file's
 * tests in a `describe`).
 */
const OWN_PROCESS: Record<string, string> = {};

/**
 * Seconds each file's tests took in a batch (PGlite, on the 2-core machine while it was busy with
 * other work, so what counts is their size relative to each other), to cut the files into
 * batches of similar length and to start the longest first: a long batch started last would
 * leave one place idle while it finishes alone. A file not listed counts as DEFAULT_SECONDS.
 */
const SECONDS: Record<string, number> = {
  'test/admin.test.ts': 40,
  'test/adversarial/dashboard-strict.test.ts': 85,
  'test/adversarial/email-destination.test.ts': 59,
  'test/adversarial/embedded-durability.test.ts': 578,
  'test/adversarial/faults-outage.test.ts': 84,
  'test/adversarial/faults.test.ts': 173,
  'test/adversarial/fuzz.test.ts': 220,
  'test/adversarial/http-bounds.test.ts': 39,
  'test/adversarial/key-roles.test.ts': 36,
  'test/adversarial/keys.test.ts': 84,
  'test/adversarial/load-isolation.test.ts': 30,
  'test/adversarial/lost-wakeup.test.ts': 92,
  'test/adversarial/mass-assignment.test.ts': 104,
  'test/adversarial/mcp-bounds.test.ts': 117,
  'test/adversarial/meter-lease.test.ts': 24,
  'test/adversarial/org-caps.test.ts': 291,
  'test/adversarial/output-bounds.test.ts': 42,
  'test/adversarial/output-schema-cost.test.ts': 60,
  'test/adversarial/prompt-injection.test.ts': 29,
  'test/adversarial/run-limit-skip.test.ts': 29,
  'test/adversarial/secret-excerpts.test.ts': 26,
  'test/adversarial/secrets.test.ts': 144,
  'test/adversarial/source-url-credentials.test.ts': 21,
  'test/adversarial/ssrf.test.ts': 96,
  'test/adversarial/stdio-env.test.ts': 38,
  'test/adversarial/stdio.test.ts': 24,
  'test/adversarial/usage-chaos.test.ts': 56,
  'test/adversarial/usage-exact.test.ts': 187,
  'test/api-key-format.test.ts': 1,
  'test/api-source.test.ts': 5,
  'test/auth.test.ts': 21,
  'test/background-kernel.test.ts': 1,
  'test/billing-period.test.ts': 1,
  'test/billing-status.test.ts': 17,
  'test/billing.test.ts': 115,
  'test/cli.test.ts': 268,
  'test/compose.test.ts': 1,
  'test/conditional-requests.test.ts': 14,
  'test/config-docs.test.ts': 1,
  'test/contract-spec-sync.test.ts': 1,
  'test/contract.test.ts': 74,
  'test/dashboard-e2e.test.ts': 30,
  'test/dashboard-pages.test.ts': 61,
  'test/dashboard-run-checks.test.ts': 39,
  'test/dashboard-run-control.test.ts': 52,
  'test/dashboard-slots.test.ts': 41,
  'test/dashboard-unattended.test.ts': 112,
  'test/deliveries.test.ts': 54,
  'test/delivery-channels.test.ts': 6,
  'test/deploy.test.ts': 233,
  'test/docs-facts.test.ts': 1,
  'test/docs-tables.test.ts': 1,
  'test/due-slot.test.ts': 11,
  'test/errors.test.ts': 6,
  'test/http-conventions.test.ts': 31,
  'test/idempotency.test.ts': 30,
  'test/isolation.test.ts': 43,
  'test/local-tools.test.ts': 1,
  'test/mcp-server.test.ts': 58,
  'test/mcp-sources.test.ts': 18,
  'test/metrics-lint.test.ts': 17,
  'test/migrations.test.ts': 72,
  'test/models.test.ts': 60,
  'test/openapi-client.test.ts': 82,
  'test/openapi-docs-page.test.ts': 79,
  'test/openapi-document.test.ts': 7,
  'test/openapi.test.ts': 23,
  'test/operations.test.ts': 17,
  'test/outbound.test.ts': 1,
  'test/output-diff.test.ts': 1,
  'test/pagination.test.ts': 49,
  'test/pglite-statements.test.ts': 4,
  'test/processes.test.ts': 293,
  'test/rate-counter.test.ts': 1,
  'test/rate-limit.test.ts': 24,
  'test/route-guards.test.ts': 47,
  'test/run-cancel-processes.test.ts': 1,
  'test/run-cancel.test.ts': 35,
  'test/run-checks-save.test.ts': 49,
  'test/run-checks.test.ts': 37,
  'test/run-execution.test.ts': 86,
  'test/run-replay.test.ts': 82,
  'test/run-sources.test.ts': 69,
  'test/runs.test.ts': 5,
  'test/scheduler-processes.test.ts': 1,
  'test/scheduler-wake.test.ts': 1,
  'test/scheduler.test.ts': 21,
  'test/skills.test.ts': 23,
  'test/slot-records.test.ts': 62,
  'test/slots.test.ts': 52,
  'test/sources.test.ts': 31,
  'test/stats.test.ts': 11,
  'test/stripe-server.test.ts': 2,
  'test/task-create.test.ts': 24,
  'test/tasks.test.ts': 37,
  'test/timezone.test.ts': 7,
  'test/unattended-runs.test.ts': 50,
  'test/users.test.ts': 113,
  'test/validation.test.ts': 46,
  'test/worker.test.ts': 231,
};
const DEFAULT_SECONDS = 20;

/** Batches in all: a few per lane, so that a batch that runs long on a busy machine is evened out by the others. */
const BATCHES = 6;

const all = globSync('test/**/*.test.ts').sort();
const realtime = all.filter((f) => f.startsWith(REALTIME_DIR));
const rest = all.filter((f) => !f.startsWith(REALTIME_DIR));
const args = process.argv.slice(2);
const files = args.filter((a) => a.endsWith('.test.ts'));
const flags = args.filter((a) => !a.endsWith('.test.ts'));

// The services a test starts as child processes compile the same sources and dependencies again
// (about 0.6 s of CPU each); so do the batches. Node's compile cache keeps the compiled code on
// disk for all of them; it changes no behaviour.
process.env.NODE_COMPILE_CACHE ??= resolve('node_modules/.cache/node-compile-cache');

const seconds = (f: string) => SECONDS[f] ?? DEFAULT_SECONDS;

interface Job {
  files: string[];
  seconds: number;
  shared: boolean;
}

/**
 * The shared files cut into BATCHES batches of similar length (longest file
 * first into the shortest batch), and the files kept alone; longest job first.
 */
function plan(testFiles: string[]): Job[] {
  const shared = testFiles.filter((f) => !(f in OWN_PROCESS)).sort((a, b) => seconds(b) - seconds(a));
  const batches: Job[] = Array.from({ length: Math.min(BATCHES, shared.length) }, () => ({
    files: [],
    seconds: 0,
    shared: true,
  }));
  for (const f of shared) {
    const shortest = batches.reduce((a, b) => (b.seconds < a.seconds ? b : a));
    shortest.files.push(f);
    shortest.seconds += seconds(f);
  }
  const alone = testFiles
    .filter((f) => f in OWN_PROCESS)
    .map((f) => ({ files: [f], seconds: seconds(f), shared: false }));
  return [...batches, ...alone].sort((a, b) => b.seconds - a.seconds);
}

/**
 * The part of a batch's output where node's spec reporter repeats its failing tests with their
 * errors ("✖ failing tests:" to the end). Printed again under the summary: a CI log is often
 * read from its end, and the batch's own output may be long scrolled away by then.
 */
function failingTests(output: string): string {
  const at = output.lastIndexOf('✖ failing tests:');
  return at < 0 ? '' : output.slice(at, at + 20_000);
}

/** A job that failed, with its failing tests as node's reporter listed them. */
type FailedJob = Job & { failures: string };

interface Outcome {
  code: number;
  output: string;
}

function nodeTest(args: string[], capture: boolean): Promise<Outcome> {
  return new Promise((done) => {
    // --liftoff-only as `npm start` runs the service (docs/operations.md, Sizing): PGlite's
    // WebAssembly stays on V8's baseline compiler, whose code a test process, short-lived, would
    // otherwise recompile at a cost of hundreds of MB (3 files: peak RSS 0.93-1.05 GB -> 0.71-0.73).
    const child = spawn(process.execPath, ['--liftoff-only', '--test', '--test-reporter=spec', ...args], {
      stdio: capture ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    });
    let output = '';
    child.stdout?.on('data', (d) => {
      output += d;
    });
    child.stderr?.on('data', (d) => {
      output += d;
    });
    child.on('error', (err) => done({ code: 1, output: `${output}\n${err.message}\n` }));
    child.on('exit', (code, signal) => done({ code: code ?? (signal ? 1 : 0), output }));
  });
}

/** The counts in the summary node's spec reporter ends with ("ℹ tests 123"). */
function counts(output: string): Record<string, number> {
  const found: Record<string, number> = {};
  for (const m of output.matchAll(/^ℹ (tests|pass|fail|cancelled|skipped|todo) (\d+)$/gm)) {
    found[m[1] as string] = Number(m[2]);
  }
  return found;
}

/**
 * Runs the jobs LANES at a time, longest first. A job's output is printed whole when it ends, so
 * the output of two jobs does not interleave.
 */
async function runJobs(jobs: Job[]): Promise<{ failed: FailedJob[]; totals: Record<string, number> }> {
  const queue = [...jobs];
  const failed: FailedJob[] = [];
  const totals: Record<string, number> = {};
  const lane = async () => {
    for (let job = queue.shift(); job; job = queue.shift()) {
      const isolation = job.shared ? ['--test-isolation=none'] : [];
      const what = job.shared ? `batch of ${job.files.length} files` : `${job.files[0]} (alone)`;
      process.stdout.write(`── started: ${what}: ${job.files.join(' ')}\n`);
      const { code, output } = await nodeTest([...isolation, ...flags, ...job.files], true);
      process.stdout.write(`\n── ended: ${what}: ${job.files.join(' ')}\n${output}`);
      for (const [k, n] of Object.entries(counts(output))) totals[k] = (totals[k] ?? 0) + n;
      if (code !== 0) failed.push({ ...job, failures: failingTests(output) });
    }
  };
  await Promise.all(Array.from({ length: LANES }, lane));
  return { failed, totals };
}

if (files.length > 0) {
  process.exitCode = (await nodeTest(['--test-concurrency=2', ...flags, ...files], false)).code;
} else {
  const [batched, beside] = await Promise.all([
    runJobs(plan(rest)),
    realtime.length > 0 ? nodeTest([...flags, ...realtime], false) : { code: 0, output: '' },
  ]);
  const { failed, totals } = batched;
  process.stdout.write(
    `\n── every batch: ${Object.entries(totals)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}\n`,
  );
  for (const job of failed) {
    process.stdout.write(`✖ failed: ${job.files.join(' ')}\n${job.failures}\n`);
  }
  process.exitCode = failed.length > 0 || beside.code !== 0 ? 1 : 0;
}
