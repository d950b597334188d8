// A model of a power cut for the embedded database, in the process that writes it: the data
// directory plays the operating system's page cache, and a second directory (the "disk") only
// receives what a flush would put on a real disk: writes through a file opened with O_SYNC, the
// whole file on fsync(), and renames and removals as they happen (a journaling filesystem
// keeps its metadata). PGlite's filesystem calls Node's fs functions on each operation, so
// replacing them here sees every write it makes. After the process is killed, the disk directory
// is what a power cut at that instant would have left.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';

export interface PowerCutDisk {
  /** Copies the data directory to the disk (what was written back before) and starts mirroring. */
  start(): void;
}

export function installPowerCutDisk(dataDir: string, diskDir: string): PowerCutDisk {
  const real = {
    openSync: fs.openSync,
    closeSync: fs.closeSync,
    writeSync: fs.writeSync,
    fsyncSync: fs.fsyncSync,
    renameSync: fs.renameSync,
    unlinkSync: fs.unlinkSync,
  };
  const root = resolve(dataDir);
  const fds = new Map<number, { path: string; sync: boolean }>();
  let mirroring = false;
  const onDisk = (path: string) => {
    const rel = relative(root, resolve(path));
    return rel.startsWith('..') ? undefined : join(diskDir, rel);
  };

  fs.openSync = ((path: fs.PathLike, flags: fs.OpenMode, mode?: fs.Mode) => {
    const fd = real.openSync(path, flags, mode);
    const sync = typeof flags === 'number' && (flags & fs.constants.O_SYNC) === fs.constants.O_SYNC;
    fds.set(fd, { path: String(path), sync });
    return fd;
  }) as typeof fs.openSync;
  fs.closeSync = (fd: number) => {
    fds.delete(fd);
    real.closeSync(fd);
  };
  fs.writeSync = ((
    fd: number,
    buffer: NodeJS.ArrayBufferView,
    offset: number,
    length: number,
    position: number,
  ) => {
    const written = real.writeSync(fd, buffer, offset, length, position);
    const file = fds.get(fd);
    const target = file?.sync && mirroring ? onDisk(file.path) : undefined;
    if (target) {
      if (typeof position !== 'number') throw new Error('the model expects positioned writes');
      fs.mkdirSync(dirname(target), { recursive: true });
      const out = real.openSync(target, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600);
      try {
        real.writeSync(out, buffer, offset, written, position);
      } finally {
        real.closeSync(out);
      }
    }
    return written;
  }) as typeof fs.writeSync;
  fs.fsyncSync = (fd: number) => {
    real.fsyncSync(fd);
    const file = fds.get(fd);
    const target = file && mirroring ? onDisk(file.path) : undefined;
    if (target && fs.statSync(file?.path ?? '').isFile()) {
      fs.mkdirSync(dirname(target), { recursive: true });
      fs.copyFileSync(file?.path ?? '', target);
    }
  };
  fs.renameSync = (from: fs.PathLike, to: fs.PathLike) => {
    real.renameSync(from, to);
    const a = mirroring ? onDisk(String(from)) : undefined;
    const b = mirroring ? onDisk(String(to)) : undefined;
    if (a && b && fs.existsSync(a)) real.renameSync(a, b);
  };
  fs.unlinkSync = (path: fs.PathLike) => {
    real.unlinkSync(path);
    const target = mirroring ? onDisk(String(path)) : undefined;
    if (target) fs.rmSync(target, { force: true });
  };
  syncBuiltinESMExports();
  return {
    start() {
      fs.cpSync(root, diskDir, { recursive: true });
      mirroring = true;
    },
  };
}
