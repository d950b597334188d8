import { PGlite, types } from '@electric-sql/pglite';
import { lockDataDir } from './data-dir-lock.ts';
import { type Db, PGLITE_PROFILE, type Queryable } from './db.ts';
import { svcBatch } from './pglite-batch.ts';
import {
  DURABLE_START_PARAMS,
  NON_DURABLE_START_PARAMS,
  SyncingNodeFS,
  syncDirectoryTree,
} from './pglite-disk.ts';
import { PgliteStatements } from './pglite-statements.ts';

export const PGLITE_PARSERS = {
  [types.INT8]: (v: string) => Number(v),
  [types.NUMERIC]: (v: string) => Number(v),
};

/**
 * Server settings of the embedded database, on top of PGlite's own. Its shared memory lives in
 * the process's WebAssembly memory and is touched when it is set up, so every megabyte of
 * `shared_buffers` is a megabyte of the service's RSS whether or not it ever caches a page:
 * PostgreSQL's default of 128 MB made an embedded worker about 50-65 MB larger than 64 MB does
 * (idle and with 1,000 runs in flight; docs/benchmarks.md, run engine). The hot pages of a
 * one-machine database (tasks, queued runs, keys) fit in 64 MB, and pages beyond them come from
 * the OS page cache: in A/B runs, primary-key reads, inserts and updates were no slower. 32 MB
 * saved little more and slowed scans of larger tables. `wal_buffers` follows `shared_buffers`
 * (1/32 of them) unless set: it stays at the 4 MB that 128 MB gave it, so commits write the WAL
 * as before.
 */
export const PGLITE_START_PARAMS: readonly string[] = ['-c', 'shared_buffers=64MB', '-c', 'wal_buffers=4MB'];

type PgliteLike = Pick<PGlite, 'query' | 'exec'>;

/**
 * PGlite executes each statement synchronously on this thread. Started straight from a request
 * (an I/O callback), statements run inside the event loop's poll phase, and under load a poll
 * phase then lasts as long as the statements it starts: sockets that became readable meanwhile
 * are served in an order that starves some of them (the first request of new connections waited
 * seconds under 50 concurrent requests; the same happens to a bare Node server doing 3 ms of
 * synchronous work per request). Waiting for the check phase (setImmediate) first lets the poll
 * phase read every ready request, so statements start in the order requests arrived. Statements
 * inside a transaction do not wait: the transaction holds the database until it ends.
 */
const afterPendingIo = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Statements inside a transaction: the transaction holds the database until it ends. */
function wrapTransaction(tx: PgliteLike, statements: PgliteStatements): Queryable {
  return {
    query: <R>(sql: string, params: readonly unknown[] = []) =>
      statements.queryInTransaction<R>(tx, sql, params),
    async exec(sql: string) {
      await tx.exec(sql);
    },
  };
}

/**
 * Opens (creating if needed) the embedded database. `memory://` keeps it in memory;
 * `loadDataDir` starts it from a dump (tests start from a migrated one). On disk, `durable`
 * (default true) makes each commit wait for the disk (see pglite-disk.ts); in memory there is
 * no disk to wait for.
 */
export async function openPglite(
  dataDir: string,
  options: { loadDataDir?: Blob; durable?: boolean } = {},
): Promise<Db> {
  const inMemory = dataDir.startsWith('memory://');
  const durable = !inMemory && options.durable !== false;
  const releaseLock = inMemory ? () => undefined : lockDataDir(dataDir);
  let pg: PGlite | undefined;
  try {
    pg = await PGlite.create({
      ...(inMemory ? {} : durable ? { fs: new SyncingNodeFS(dataDir) } : { dataDir }),
      parsers: PGLITE_PARSERS,
      startParams: [...(durable ? DURABLE_START_PARAMS : NON_DURABLE_START_PARAMS), ...PGLITE_START_PARAMS],
      ...(options.loadDataDir && { loadDataDir: options.loadDataDir }),
    });
    // Files written before fsync was real (initdb, a start in the other mode) reach the disk too.
    if (durable) syncDirectoryTree(dataDir);
  } catch (err) {
    await pg?.close().catch(() => undefined);
    releaseLock();
    throw err;
  }
  return pgliteDb(pg, releaseLock);
}

/** The Db seam over an open PGlite instance; `onClose` runs after the instance closes. */
export function pgliteDb(pg: PGlite, onClose: () => void = () => undefined): Db {
  const statements = new PgliteStatements(pg);
  const query = async <R>(sql: string, params: readonly unknown[] = []) => {
    await afterPendingIo();
    return statements.query<R>(sql, params);
  };
  return {
    backend: PGLITE_PROFILE,
    query,
    batch: svcBatch(query),
    async exec(sql: string) {
      await afterPendingIo();
      await pg.exec(sql);
    },
    transaction: async (fn) => {
      await afterPendingIo();
      return pg.transaction((tx) => fn(wrapTransaction(tx, statements)));
    },
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
