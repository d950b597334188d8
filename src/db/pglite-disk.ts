import { closeSync, fsyncSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { NodeFS } from '@electric-sql/pglite/nodefs';

/**
 * How the embedded database writes to disk.
 *
 * PGlite starts PostgreSQL with `-F` (fsync=off), and its Node filesystem does not pass fsync to
 * the operating system either (Emscripten's NODEFS has no fsync operation, and its fdatasync is a
 * no-op). Every write still goes to the OS with a write() call at commit, so a killed process
 * loses nothing acknowledged, but a power cut or kernel crash loses whatever the OS had not yet
 * written back, and can leave the cluster inconsistent.
 *
 * Durable mode (the default) turns fsync back on and makes it real:
 * - the WAL is opened with O_DSYNC (`wal_sync_method=open_datasync`), which NODEFS maps to
 *   Node's O_SYNC, so each commit returns only once its WAL record is on disk;
 * - fsync() of data files, the control file and directories (checkpoints, renames) reaches the
 *   OS through the fsync operation added below, so a checkpoint never claims pages the disk does
 *   not have;
 * - the whole directory is flushed once on open, covering files written by initdb or by an
 *   earlier start in the other mode.
 */
export const DURABLE_START_PARAMS: readonly string[] = [
  ...PGlite.defaultStartParams.filter((p) => p !== '-F'),
  '-c',
  'wal_sync_method=open_datasync',
];

export const NON_DURABLE_START_PARAMS: readonly string[] = [...PGlite.defaultStartParams];

/** Emscripten's errno for EIO (its own numbering, not Linux's). */
const EMSCRIPTEN_EIO = 29;

interface NodefsStream {
  nfd?: number;
}
interface EmscriptenModuleWithNodefs {
  NODEFS: { stream_ops: { fsync?: (stream: NodefsStream) => number } };
  FS: { ErrnoError: new (errno: number) => Error };
}

/** NodeFS whose fsync reaches the disk. */
export class SyncingNodeFS extends NodeFS {
  override async init(pg: PGlite, opts: Parameters<NodeFS['init']>[1]) {
    const result = await super.init(pg, opts);
    const preRun = result.emscriptenOpts.preRun ?? [];
    result.emscriptenOpts.preRun = [
      ...preRun,
      (mod: unknown) => {
        const m = mod as EmscriptenModuleWithNodefs;
        // Each PGlite instance has its own module, so this touches this database only.
        m.NODEFS.stream_ops.fsync = (stream) => {
          if (stream.nfd === undefined) return 0;
          try {
            fsyncSync(stream.nfd);
            return 0;
          } catch {
            // PostgreSQL treats a failed fsync as a lost write (PANIC) rather than acknowledging.
            throw new m.FS.ErrnoError(EMSCRIPTEN_EIO);
          }
        };
      },
    ];
    return result;
  }
}

/** Flushes every file and directory under `dir` to disk. */
export function syncDirectoryTree(dir: string): number {
  let files = 0;
  const syncPath = (path: string) => {
    const fd = openSync(path, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  };
  const walk = (path: string) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const child = join(path, entry.name);
      if (entry.isDirectory()) walk(child);
      else if (entry.isFile()) {
        syncPath(child);
        files++;
      }
    }
    syncPath(path);
  };
  walk(dir);
  return files;
}
