// Compiling a user's JSON Schema, and validating an output against it, in a thread of its own
// with a time and memory limit. JSON Schema lets a small schema take exponential time (a chain
// of definitions each referring twice to the next, a `pattern` that backtracks on the output),
// and the event loop of the process that serves requests and runs every organization's runs
// must never wait on that: the thread is stopped at the limit, whatever it is doing.
import { Worker } from 'node:worker_threads';
import type { ThreadAnswer } from './json-schema-thread.ts';

/** How long compiling a schema, and validating one output, may take (the thread's start aside). */
export const SCHEMA_CHECK_SECONDS = 5;
/** Heap of one checking thread. */
export const SCHEMA_CHECK_HEAP_MB = 64;
/** How long a thread may take to start before the check is given up (a machine under load). */
const START_MS = 60_000;
/**
 * Checking threads at once in a process (each may hold its heap for its time limit); more
 * checks wait their turn, in order. Saves are bounded further per organization
 * (domain/run-checks.ts), runs by the worker's concurrency.
 */
export const SCHEMA_CHECKS_AT_ONCE = 4;

let running = 0;
const waiting: (() => void)[] = [];

/** Runs `check` when one of the SCHEMA_CHECKS_AT_ONCE places is free. */
async function inTurn<T>(check: () => Promise<T>): Promise<T> {
  if (running >= SCHEMA_CHECKS_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
  else running++;
  try {
    return await check();
  } finally {
    // The place goes straight to the next in line, if any.
    const next = waiting.shift();
    if (next) next();
    else running--;
  }
}

export type SchemaCheck =
  | { ok: true }
  | { ok: false; kind: 'bad_schema' | 'not_json'; message: string }
  | { ok: false; kind: 'mismatch'; path: string; message: string }
  | { ok: false; kind: 'too_costly'; message: string };

const THREAD = new URL('./json-schema-thread.ts', import.meta.url);

/**
 * Compiles `schema` and, when `output` is given, validates the output (JSON text) against it.
 * Never rejects: a thread that fails or runs out of time or memory is a `too_costly` answer.
 */
export function checkJsonSchema(schema: object, output?: string): Promise<SchemaCheck> {
  return inTurn(() => checkInThread(schema, output));
}

function checkInThread(schema: object, output: string | undefined): Promise<SchemaCheck> {
  return new Promise((resolve) => {
    const worker = new Worker(THREAD, {
      workerData: { schema, output },
      resourceLimits: { maxOldGenerationSizeMb: SCHEMA_CHECK_HEAP_MB, maxYoungGenerationSizeMb: 16 },
      stdout: true,
      stderr: true,
    });
    let settled = false;
    const finish = (answer: SchemaCheck) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(answer);
      void worker.terminate();
    };
    const costly = (why: string): SchemaCheck => ({ ok: false, kind: 'too_costly', message: why });
    let timer = setTimeout(() => finish(costly('the thread did not start')), START_MS);
    worker.on('message', (answer: ThreadAnswer) => {
      switch (answer.kind) {
        case 'started':
          clearTimeout(timer);
          timer = setTimeout(
            () => finish(costly(`it took more than ${SCHEMA_CHECK_SECONDS} s`)),
            SCHEMA_CHECK_SECONDS * 1000,
          );
          return;
        case 'ok':
          return finish({ ok: true });
        case 'bad_schema':
        case 'not_json':
          return finish({ ok: false, kind: answer.kind, message: answer.message });
        case 'mismatch':
          return finish({ ok: false, kind: 'mismatch', path: answer.path, message: answer.message });
      }
    });
    worker.on('error', (err: Error & { code?: string }) =>
      finish(
        costly(
          err.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? `it needed more than ${SCHEMA_CHECK_HEAP_MB} MiB`
            : `the check failed (${err.message})`,
        ),
      ),
    );
    worker.on('exit', () => finish(costly('the check ended without an answer')));
  });
}
