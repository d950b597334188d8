// Our own MCP client transport over a child process's stdin/stdout. The SDK's
// StdioClientTransport merges a default environment (HOME, PATH, USER…) of the service into
// the child; a stdio source must see nothing of the service, so the process is spawned here
// with a small fixed environment plus the config.env the caller allowed, and, when the
// service runs as root, as an unprivileged user.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { constants, rmSync } from 'node:fs';
import { access, chown, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { StdioUser } from '../../../lib/stdio-config.ts';
import { formatBytes } from '../../capped-response.ts';
import { MAX_MCP_MESSAGE_BYTES } from '../tool-bounds.ts';
import { claimStdioUser } from './stdio-users.ts';

/** Where commands are looked up when the caller gives no search path. */
export const DEFAULT_SEARCH_PATH = '/usr/local/bin:/usr/bin:/bin';
/**
 * The PATH a server gets: the directory of its own command (so `#!/usr/bin/env node` finds
 * the node next to it) and the system directories. It is deliberately not the service's PATH.
 */
const FIXED_PATH_TAIL = '/usr/local/bin:/usr/bin:/bin';
const KILL_GRACE_MS = 2000;
const STDERR_KEEP_BYTES = 8 * 1024;

export interface StdioTransportOptions {
  /** As stored in config.command: a bare name looked up on `searchPath`, or an absolute path. */
  command: string;
  args?: readonly string[];
  /**
   * The source's variables (its opened config.env, already checked against the command's
   * allow-list). They are added to the fixed PATH, HOME (the server's own empty directory)
   * and LANG, and may replace them when the operator allowed those names.
   */
  env: Readonly<Record<string, string>>;
  /** Start the server as this user, or one of this range (the service runs as root); undefined keeps the service's user. */
  user?: StdioUser | undefined;
  /** The service's PATH, where a bare command name is looked up. */
  searchPath?: string;
  /** One message line larger than this (no newline yet) kills the server. */
  maxLineBytes?: number;
  /** More stdout than this over the whole connection kills the server. */
  maxTotalBytes?: number;
}

export type StdioFailureReason = 'not_found' | 'spawn_failed' | 'output_limit';

export class StdioServerError extends Error {
  readonly reason: StdioFailureReason;
  /** The errno code of a failed spawn (ENOENT, EACCES…). */
  readonly code: string | undefined;
  constructor(reason: StdioFailureReason, message: string, code?: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'StdioServerError';
    this.reason = reason;
    this.code = code;
  }
}

async function isExecutableFile(path: string): Promise<boolean> {
  try {
    if (!(await stat(path)).isFile()) return false;
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The absolute path of the command: an absolute command as is, a bare name searched in the
 * absolute directories of `searchPath`. A relative path with a slash is not resolved: the
 * server runs in a fresh temporary directory, so it could not mean anything there.
 */
export async function resolveCommand(command: string, searchPath: string): Promise<string | undefined> {
  if (isAbsolute(command)) return (await isExecutableFile(command)) ? command : undefined;
  if (command.includes('/')) return undefined;
  for (const dir of searchPath.split(delimiter)) {
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, command);
    if (await isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

// Servers still running when the service exits are killed with it (an 'exit' listener can
// only do synchronous work, which process.kill and rmSync are). A service killed with SIGKILL
// cannot do this; its servers then see their stdin close, on which MCP servers exit.
const liveGroups = new Set<number>();
const liveDirs = new Set<string>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pid of liveGroups) killGroup(pid, 'SIGKILL');
    for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
  });
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is gone already.
  }
}

export class StdioMcpTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;

  readonly #options: StdioTransportOptions;
  readonly #readBuffer: ReadBuffer;
  #child: ChildProcessWithoutNullStreams | undefined;
  #dir: string | undefined;
  #releaseUser: (() => void) | undefined;
  #stdoutBytes = 0;
  #stderr: Buffer = Buffer.alloc(0);
  #exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  #failure: StdioServerError | undefined;
  #closing = false;
  #exitedUnasked = false;
  #closed: Promise<void> | undefined;
  #notifiedClose = false;

  constructor(options: StdioTransportOptions) {
    this.#options = options;
    this.#readBuffer = new ReadBuffer({ maxBufferSize: options.maxLineBytes ?? MAX_MCP_MESSAGE_BYTES });
  }

  /** The process id (also its process group id), once started. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }
  /** How the process ended, once it has. */
  get exitStatus(): { code: number | null; signal: NodeJS.Signals | null } | undefined {
    return this.#exit;
  }
  /** How the process ended if it did so before close() asked it to (a crash, a failed start). */
  get unaskedExit(): { code: number | null; signal: NodeJS.Signals | null } | undefined {
    return this.#exitedUnasked ? this.#exit : undefined;
  }
  /** Why the transport gave up on the server (its output broke a limit). */
  get failure(): StdioServerError | undefined {
    return this.#failure;
  }
  /** The last few KB the server wrote to stderr (never passed on to the service's logs). */
  stderrText(): string {
    return this.#stderr.toString('utf8');
  }

  async start(): Promise<void> {
    if (this.#child || this.#dir) throw new Error('the stdio transport is already started');
    const { command, args = [], env } = this.#options;
    const searchPath = this.#options.searchPath ?? DEFAULT_SEARCH_PATH;
    const resolved = await resolveCommand(command, searchPath);
    if (!resolved) {
      throw new StdioServerError(
        'not_found',
        isAbsolute(command)
          ? `command ${command} does not exist or is not executable`
          : `command "${command}" was not found in the service's PATH (${searchPath})`,
      );
    }
    const user = this.#options.user && claimStdioUser(this.#options.user);
    if (this.#options.user && !user) {
      throw new StdioServerError(
        'spawn_failed',
        'every uid of the SVC_STDIO_USER range is in use; try again later',
      );
    }
    this.#releaseUser = user?.release;
    this.#dir = await mkdtemp(join(tmpdir(), 'svc-mcp-'));
    liveDirs.add(this.#dir);
    // The server's working directory and HOME: its own, so it can write there as the user it runs as.
    if (user) await chown(this.#dir, user.uid, user.gid);
    const childEnv: Record<string, string> = {
      PATH: `${dirname(resolved)}:${FIXED_PATH_TAIL}`,
      HOME: this.#dir,
      LANG: 'C.UTF-8',
      ...env,
    };
    if (this.#closing) {
      await this.#removeDir();
      throw new Error('the stdio transport was closed while starting');
    }
    installExitHook();
    // detached: its own process group, so closing kills the server and whatever it started.
    const child = spawn(resolved, [...args], {
      cwd: this.#dir,
      env: childEnv,
      shell: false,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
      // libuv drops the supplementary groups too when it changes the user.
      ...(user && { uid: user.uid, gid: user.gid }),
    });
    try {
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
    } catch (err) {
      await this.#removeDir();
      const code = (err as NodeJS.ErrnoException).code;
      // The usual cause under another user: it cannot reach the program (a 0700 parent directory).
      const as = user ? ` as uid ${user.uid} (SVC_STDIO_USER, which must be able to run it)` : '';
      throw new StdioServerError(
        'spawn_failed',
        `could not start ${resolved}${as}: ${code ?? String(err)}`,
        code,
        err,
      );
    }
    this.#child = child;
    const pid = child.pid as number;
    liveGroups.add(pid);
    child.on('error', (err) => this.onerror?.(err));
    // EPIPE when the server has gone: the write callbacks report it to the sender.
    child.stdin.on('error', () => {});
    child.stdout.on('data', (chunk: Buffer) => this.#onStdout(chunk));
    child.stderr.on('data', (chunk: Buffer) => this.#onStderr(chunk));
    child.once('exit', (code, signal) => {
      this.#exit = { code, signal };
      this.#exitedUnasked = !this.#closing;
      // The group does not outlive its leader: whatever the server started goes with it.
      killGroup(pid, 'SIGKILL');
      liveGroups.delete(pid);
    });
    // 'close' comes after the pipes are drained, so stderrText() is complete by then.
    this.#closed = new Promise<void>((resolve) => {
      child.once('close', () => {
        void this.#removeDir().finally(() => {
          this.#notifyClose();
          resolve();
        });
      });
    });
    if (this.#closing) {
      // close() ran while the process was starting and found nothing to kill yet.
      killGroup(pid, 'SIGKILL');
      throw new Error('the stdio transport was closed while starting');
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    const child = this.#child;
    if (!child || this.#exit || this.#closing || !child.stdin.writable) {
      return Promise.reject(new Error('the stdio server is not running'));
    }
    return new Promise((resolve, reject) => {
      child.stdin.write(serializeMessage(message), (err) => (err ? reject(err) : resolve()));
    });
  }

  /** Ends the server: SIGTERM to its group, SIGKILL after a grace period. Idempotent. */
  async close(): Promise<void> {
    const child = this.#child;
    if (!this.#closing) {
      this.#closing = true;
      if (!child) {
        this.#notifyClose();
        return;
      }
      if (!this.#exit && child.pid !== undefined) {
        const pid = child.pid;
        child.stdin.end();
        killGroup(pid, 'SIGTERM');
        const timer = setTimeout(() => killGroup(pid, 'SIGKILL'), KILL_GRACE_MS);
        void this.#closed?.then(() => clearTimeout(timer));
      }
    }
    await this.#closed;
  }

  #onStdout(chunk: Buffer): void {
    if (this.#failure) return;
    this.#stdoutBytes += chunk.length;
    const maxTotal = this.#options.maxTotalBytes ?? 64 * 1024 * 1024;
    if (this.#stdoutBytes > maxTotal) {
      this.#fail(`the server wrote more than ${formatBytes(maxTotal)} to stdout`);
      return;
    }
    try {
      this.#readBuffer.append(chunk);
    } catch {
      this.#fail(
        `the server sent a message line larger than ${formatBytes(this.#options.maxLineBytes ?? MAX_MCP_MESSAGE_BYTES)}`,
      );
      return;
    }
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.#readBuffer.readMessage();
      } catch (err) {
        // A line that is not JSON-RPC (a stray log line): reported, not fatal, like the SDK.
        this.onerror?.(err instanceof Error ? err : new Error(String(err)));
        continue;
      }
      if (message === null) break;
      this.onmessage?.(message);
    }
  }

  #onStderr(chunk: Buffer): void {
    const all = Buffer.concat([this.#stderr, chunk]);
    this.#stderr = all.length > STDERR_KEEP_BYTES ? Buffer.from(all.subarray(-STDERR_KEEP_BYTES)) : all;
  }

  #fail(message: string): void {
    this.#failure = new StdioServerError('output_limit', message);
    this.#readBuffer.clear();
    this.onerror?.(this.#failure);
    if (this.#child?.pid !== undefined) killGroup(this.#child.pid, 'SIGKILL');
  }

  async #removeDir(): Promise<void> {
    // The server and its directory are gone: its uid may serve another one.
    this.#releaseUser?.();
    this.#releaseUser = undefined;
    const dir = this.#dir;
    if (!dir) return;
    await rm(dir, { recursive: true, force: true }).catch(() => {});
    liveDirs.delete(dir);
  }

  #notifyClose(): void {
    if (this.#notifiedClose) return;
    this.#notifiedClose = true;
    this.onclose?.();
  }
}
