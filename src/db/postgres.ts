import { createHash } from 'node:crypto';
import pg from 'pg';
import { type Db, PLAN_EACH_TIME, postgresProfile, type Queryable } from './db.ts';

const INT8_OID = 20;
const NUMERIC_OID = 1700;

function typeParser(oid: number, format?: string) {
  if (oid === INT8_OID || oid === NUMERIC_OID) return (v: string) => Number(v);
  return pg.types.getTypeParser(oid, format as 'text');
}

/**
 * Statements are prepared once per connection and reused (named by a digest of their text):
 * the service's SQL is a fixed set of texts, so parsing and planning a statement, which costs
 * more than running most of them, is paid once. After a few executions PostgreSQL may keep
 * one generic plan for all parameter values; statements whose best plan depends on their values
 * (the queue's claims, with their LIMITs and skewed backlogs) start with PLAN_EACH_TIME and are
 * sent unprepared, planned for the values of each execution.
 */
const statementNames = new Map<string, string>();
function statementName(sql: string): string | undefined {
  if (sql.startsWith(PLAN_EACH_TIME)) return undefined;
  let name = statementNames.get(sql);
  if (!name) {
    name = `svc_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
    statementNames.set(sql, name);
  }
  return name;
}

function wrap(client: pg.Pool | pg.PoolClient): Queryable {
  return {
    async query<R>(sql: string, params: readonly unknown[] = []) {
      const name = statementName(sql);
      const res = await client.query({
        ...(name && { name }),
        text: sql,
        values: params as unknown[],
        types: { getTypeParser: typeParser },
      });
      return res.rows as R[];
    },
    async exec(sql: string) {
      await client.query(sql);
    },
  };
}

export async function openPostgres(
  url: string,
  poolSize: number,
  onError: (err: Error) => void,
): Promise<Db> {
  const pool = new pg.Pool({ connectionString: url, max: poolSize, connectionTimeoutMillis: 10_000 });
  // An idle client that loses its connection (server restart) emits here; without a listener
  // the process would crash. The pool replaces the client on the next checkout.
  pool.on('error', onError);
  const base = wrap(pool);
  return {
    backend: postgresProfile(poolSize),
    query: base.query,
    exec: base.exec,
    async transaction(fn) {
      const client = await pool.connect();
      // The pool listens for errors only on idle clients. A connection lost while this one is
      // checked out (server restart, network cut) is emitted on the client itself, and an
      // 'error' event without a listener would end the process. The statement in progress
      // fails with it (the caller sees the error), and the broken client is discarded.
      let broken: Error | undefined;
      const onLost = (err: Error) => {
        broken ??= err;
        onError(err);
      };
      client.on('error', onLost);
      try {
        await client.query('BEGIN');
        const result = await fn(wrap(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        if (!broken) {
          await client.query('ROLLBACK').catch((rollbackErr: Error) => {
            broken ??= rollbackErr;
          });
        }
        throw err;
      } finally {
        client.off('error', onLost);
        // Releasing with an error closes the client instead of returning it to the pool.
        client.release(broken);
      }
    },
    listen: (channel, onNotify) => listenWithReconnect(url, channel, onNotify, onError),
    close: () => pool.end(),
  };
}

const RECONNECT_DELAY_MS = 1000;

/**
 * LISTEN needs a connection of its own (a pooled one would be handed to other queries). When it
 * drops, it is reopened after a pause and `onNotify('')` is called, because notifications sent
 * in between were lost and the listener must look for work itself.
 */
async function listenWithReconnect(
  url: string,
  channel: string,
  onNotify: (payload: string) => void,
  onError: (err: Error) => void,
): Promise<() => Promise<void>> {
  if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`invalid channel name: ${channel}`);
  let client: pg.Client | undefined;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;

  const connect = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
    c.on('notification', (msg) => {
      if (msg.channel === channel) onNotify(msg.payload ?? '');
    });
    c.on('error', (err) => {
      onError(err);
      c.end().catch(() => undefined);
      if (client === c) client = undefined;
      scheduleReconnect();
    });
    await c.connect();
    await c.query(`LISTEN ${channel}`);
    if (stopped) {
      await c.end();
      return;
    }
    client = c;
  };

  const scheduleReconnect = () => {
    if (stopped || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      connect().then(
        () => onNotify(''),
        (err: Error) => {
          onError(err);
          scheduleReconnect();
        },
      );
    }, RECONNECT_DELAY_MS);
    retry.unref();
  };

  await connect();
  return async () => {
    stopped = true;
    if (retry) clearTimeout(retry);
    await client?.end().catch(() => undefined);
    client = undefined;
  };
}
