import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite, types } from '@electric-sql/pglite';
import { type Db, PGLITE_PROFILE, type Queryable } from './db.ts';

export const PGLITE_PARSERS = {
  [types.INT8]: (v: string) => Number(v),
  [types.NUMERIC]: (v: string) => Number(v),
};

type PgliteLike = Pick<PGlite, 'query' | 'exec'>;

function wrap(pg: PgliteLike): Queryable {
  return {
    async query<R>(sql: string, params: readonly unknown[] = []) {
      const res = await pg.query<R>(sql, params as unknown[]);
      return res.rows;
    },
    async exec(sql: string) {
      await pg.exec(sql);
    },
  };
}

/**
 * Opens (creating if needed) the embedded database. `memory://` keeps it in memory;
 * `loadDataDir` starts it from a dump (tests start from a migrated one).
 */
export async function openPglite(dataDir: string, options: { loadDataDir?: Blob } = {}): Promise<Db> {
  const inMemory = dataDir.startsWith('memory://');
  const releaseLock = inMemory ? () => undefined : lockDataDir(dataDir);
  let pg: PGlite;
  try {
    pg = await PGlite.create({
      dataDir: inMemory ? undefined : dataDir,
      parsers: PGLITE_PARSERS,
      ...(options.loadDataDir && { loadDataDir: options.loadDataDir }),
    });
  } catch (err) {
    releaseLock();
    throw err;
  }
  return pgliteDb(pg, releaseLock);
}

/** The Db seam over an open PGlite instance; `onClose` runs after the instance closes. */
export function pgliteDb(pg: PGlite, onClose: () => void = () => undefined): Db {
  const base = wrap(pg);
  return {
    backend: PGLITE_PROFILE,
    query: base.query,
    exec: base.exec,
    transaction: (fn) => pg.transaction((tx) => fn(wrap(tx))),
    async listen(channel, onNotify) {
      const unlisten = await pg.listen(channel, onNotify);
      return async () => {
        if (!pg.closed) await unlisten();
      };
    },
    async close() {
      await pg.close();
      onClose();
    },
  };
}

/**
 * PGlite is a single-process database: two processes writing one data directory would corrupt
 * it. A lock file with the owner's pid refuses the second opener; a stale lock (its process
 * gone, e.g. after SIGKILL) is taken over.
 */
function lockDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const lockPath = join(dataDir, 'svc.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(lockPath, String(process.pid), { flag: 'wx' });
      return () => rmSync(lockPath, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = Number(readFileSync(lockPath, 'utf8').trim());
      if (owner && owner !== process.pid && isAlive(owner)) {
        throw new Error(
          `data directory ${dataDir} is in use by process ${owner}; the embedded database serves one process (use DATABASE_URL to run several)`,
        );
      }
      rmSync(lockPath, { force: true });
    }
  }
  throw new Error(`could not lock data directory ${dataDir}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
