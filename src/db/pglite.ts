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
import { StatementTurns } from './pglite-turns.ts';

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
  // Every statement and transaction waits for the event loop's check phase, and lets the loop
  // turn when statements have held the thread for a while (pglite-turns.ts).
  const turns = new StatementTurns();
  // The process's listeners by channel. PGlite delivers the notifications in the answers it
  // reads itself (transactions' commits, statements not prepared) to its own listeners; those in
  // the answers of prepared statements, read by the service (pglite-answer.ts), are delivered
  // from here, a microtask later as PGlite does. Each notification is in one answer only.
  const listeners = new Map<string, Set<(payload: string) => void>>();
  const notify = (channel: string, payload: string) => {
    for (const listener of listeners.get(channel) ?? []) queueMicrotask(() => listener(payload));
  };
  const statements = new PgliteStatements(pg, turns, notify);
  const query = <R>(sql: string, params: readonly unknown[] = []) =>
    turns.run(() => statements.query<R>(sql, params));
  return {
    backend: PGLITE_PROFILE,
    query,
    batch: svcBatch(query),
    async exec(sql: string) {
      await turns.run(async () => {
        await turns.yieldIfDue();
        await pg.exec(sql);
      });
    },
    transaction: (fn) =>
      turns.run(() =>
        pg.transaction(async (tx) => {
          await turns.yieldIfDue();
          return fn(wrapTransaction(tx, statements));
        }),
      ),
    async listen(channel, onNotify) {
      const unlisten = await pg.listen(channel, onNotify);
      // Channels are named as they arrive in notifications: the service's are lower-case.
      let set = listeners.get(channel);
      if (!set) {
        set = new Set();
        listeners.set(channel, set);
      }
      set.add(onNotify);
      return async () => {
        set.delete(onNotify);
        if (set.size === 0 && listeners.get(channel) === set) listeners.delete(channel);
        if (!pg.closed) await unlisten();
      };
    },
    async close() {
      await pg.close();
      onClose();
    },
  };
}
