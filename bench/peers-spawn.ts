// The peers' worker processes (bench/peers-worker.ts) as the peers benchmark starts them, the
// model-only ceiling run the same way, and whether Redis is there for BullMQ.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { type Child, childEnv } from './baselines.ts';
import type { PeerName, PeerWorkerOptions } from './peers-worker.ts';

const WORKER = fileURLToPath(new URL('./peers-worker.ts', import.meta.url));

/** Worker processes still running: a bench that ends or fails must not leave them behind. */
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const p of running) p.kill('SIGKILL');
});

/** Starts `node bench/peers-worker.ts <system> <options>` and waits for its ready line. */
export function startPeerWorker(
  system: PeerName | 'ceiling',
  o: PeerWorkerOptions,
): Promise<Child & { line: Promise<string> }> {
  const proc = spawn(process.execPath, [WORKER, system, JSON.stringify(o)], {
    env: childEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(proc);
  proc.on('exit', () => running.delete(proc));
  let err = '';
  proc.stderr.on('data', (d) => {
    err = (err + d).slice(-20_000);
  });
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  let out = '';
  let gotLine: (l: string) => void = () => undefined;
  const line = new Promise<string>((r) => {
    gotLine = r;
  });
  proc.stdout.on('data', (d) => {
    out += d;
    const m = /^(ready|done .*)$/m.exec(out);
    if (m?.[1]) gotLine(m[1]);
  });
  const child = {
    proc,
    pid: proc.pid ?? 0,
    url: '',
    info: {},
    stderr: () => err,
    line,
    async stop(graceMs = 30_000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
  return Promise.race([
    line.then(() => child),
    exited.then((code) => {
      throw new Error(`${system} worker exited with ${code}:\n${err}`);
    }),
  ]);
}

/** The model-only ceiling: `calls` model calls at `concurrency` from a process of their own. */
export async function modelCeiling(modelUrl: string, calls: number, concurrency: number): Promise<number> {
  const c = await startPeerWorker('ceiling', { url: '', modelUrl, concurrency, queue: '', calls });
  const line = await c.line;
  await c.stop();
  return Number(line.replace('done ', ''));
}

/** Whether Redis answers PING at `url` within a second. */
export async function redisAnswers(url: string): Promise<boolean> {
  const { Socket } = await import('node:net');
  const u = new URL(url);
  return new Promise((resolve) => {
    const s = new Socket();
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(1000, () => done(false));
    s.once('error', () => done(false));
    s.connect(Number(u.port || 6379), u.hostname, () => s.write('PING\r\n'));
    s.once('data', (d) => done(String(d).startsWith('+PONG')));
  });
}
