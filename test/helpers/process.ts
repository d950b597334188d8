import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

/**
 * What a child process gets of the test runner's environment: PATH, and Node's compile cache
 * when the runner has one (scripts/test.ts), which only spares the child compiling again.
 */
export function childBaseEnv(): Record<string, string> {
  const { PATH = '', NODE_COMPILE_CACHE } = process.env;
  return { PATH, ...(NODE_COMPILE_CACHE && { NODE_COMPILE_CACHE }) };
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  /** Waits until stdout matches (the output after "listening" arrives a moment later). */
  waitForStdout(pattern: RegExp, timeoutMs?: number): Promise<string>;
}

/**
 * Runs the real entry point (`node src/main.ts`, what `npm start` runs) in a child process with
 * exactly the given environment (none of the test runner's), and waits until it listens.
 * `nodeArgs` go before the entry point (an `--import` that watches what the process loads).
 */
export async function startServerProcess(
  env: Record<string, string>,
  timeoutMs = 30_000,
  nodeArgs: readonly string[] = [],
): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...nodeArgs, MAIN], {
    env: { ...childBaseEnv(), PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d) => {
    out += d;
  });
  child.stderr?.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      // A child left running would keep the test process alive after the failure.
      child.kill('SIGKILL');
      reject(new Error(`server did not start in time:\n${out}\n${err}`));
    }, timeoutMs);
    const check = () => {
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout?.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${out}\n${err}`));
    });
  });
  const waitForStdout = async (pattern: RegExp, waitMs = 5000) => {
    const deadline = Date.now() + waitMs;
    while (!pattern.test(out)) {
      if (Date.now() > deadline) throw new Error(`stdout never matched ${pattern}:\n${out}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return out;
  };
  return { child, url, stdout: () => out, stderr: () => err, exited, waitForStdout };
}

/** Runs the entry point expecting it to fail at startup; returns its exit code and output. */
export async function runFailingStart(
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [MAIN], {
    env: { ...childBaseEnv(), PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d) => {
    err += d;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stderr: err };
}
