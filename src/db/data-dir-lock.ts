import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * PGlite is a single-process database: two processes writing one data directory would corrupt
 * it. `svc.lock` names its owner as `<pid> <start> <boot>`: the process id, the process's start
 * time (clock ticks since boot, /proc/<pid>/stat) and the kernel's boot id. A second opener is
 * refused while that very process runs. A lock whose process is gone (SIGKILL, crash), whose
 * pid now belongs to another process (pids are reused: a different start time), or that was
 * written before the last reboot (a different boot id) is stale and taken over. A lock holding
 * the pid alone (written by an earlier version) is stale when its live pid's process started
 * after the lock was written. Where /proc is missing (not Linux) the lock holds the pid alone
 * and a live pid keeps the directory locked.
 */
export function lockDataDir(dataDir: string): () => void {
  // Only the service's user may enter it (stdio servers run as another user when it is root).
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const lockPath = join(dataDir, 'svc.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(lockPath, formatOwner(ownIdentity()), { flag: 'wx' });
      return () => rmSync(lockPath, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = parseOwner(readFileSync(lockPath, 'utf8'));
      if (owner && owner.pid !== process.pid && holdsLock(owner, lockPath)) {
        throw new Error(
          `data directory ${dataDir} is in use by process ${owner.pid}; the embedded database serves one process (use DATABASE_URL to run several). If no service runs on it, remove ${lockPath}`,
        );
      }
      rmSync(lockPath, { force: true });
    }
  }
  throw new Error(`could not lock data directory ${dataDir}`);
}

export interface LockOwner {
  pid: number;
  /** Start time in clock ticks since boot; undefined when unknown (no /proc, or an old lock). */
  start: string | undefined;
  bootId: string | undefined;
}

export function formatOwner(owner: LockOwner): string {
  return [owner.pid, owner.start, owner.bootId].filter((v) => v !== undefined).join(' ');
}

export function parseOwner(text: string): LockOwner | undefined {
  const [pid, start, bootId] = text.trim().split(/\s+/);
  const n = Number(pid);
  if (!Number.isSafeInteger(n) || n <= 0) return undefined;
  return { pid: n, start, bootId };
}

function ownIdentity(): LockOwner {
  const start = processStartTime(process.pid);
  return { pid: process.pid, start, bootId: start === undefined ? undefined : bootId() };
}

/** Whether the process named by the lock still runs, as the same process. */
function holdsLock(owner: LockOwner, lockPath: string): boolean {
  if (!isAlive(owner.pid)) return false;
  if (owner.bootId !== undefined) {
    const current = bootId();
    if (current !== undefined && current !== owner.bootId) return false;
  }
  const current = processStartTime(owner.pid);
  if (current === undefined) return true;
  if (owner.start !== undefined) return current === owner.start;
  const startedAt = startWallClockMs(current);
  if (startedAt === undefined) return true;
  // The owner wrote the lock after it started; a process that started later is not the owner.
  return startedAt <= statSync(lockPath).mtimeMs + WALL_CLOCK_SLACK_MS;
}

/**
 * /proc/uptime and the tick count have 10 ms steps; the slack also absorbs small clock
 * adjustments. A pid reused within a second of the lock being written still reads as in use.
 */
const WALL_CLOCK_SLACK_MS = 1000;
/** USER_HZ: 100 on every Linux architecture Node runs on. */
const TICKS_PER_SECOND = 100;

function startWallClockMs(startTicks: string): number | undefined {
  try {
    const uptimeSeconds = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    if (!Number.isFinite(uptimeSeconds)) return undefined;
    return Date.now() - uptimeSeconds * 1000 + (Number(startTicks) / TICKS_PER_SECOND) * 1000;
  } catch {
    return undefined;
  }
}

/**
 * Field 22 of /proc/<pid>/stat. The command name (field 2) is in parentheses and may itself hold
 * spaces or parentheses, so fields are counted from the last ')'.
 */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the ')': field 3 (state) is index 0, so field 22 is index 19.
    const start = fields[19];
    return start && /^\d+$/.test(start) ? start : undefined;
  } catch {
    return undefined;
  }
}

function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
