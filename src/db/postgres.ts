import pg from 'pg';
import { type Db, postgresProfile, type Queryable } from './db.ts';

const INT8_OID = 20;
const NUMERIC_OID = 1700;

function typeParser(oid: number, format?: string) {
  if (oid === INT8_OID || oid === NUMERIC_OID) return (v: string) => Number(v);
  return pg.types.getTypeParser(oid, format as 'text');
}

function wrap(client: pg.Pool | pg.PoolClient): Queryable {
  return {
    async query<R>(sql: string, params: readonly unknown[] = []) {
      const res = await client.query({
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
      try {
        await client.query('BEGIN');
        const result = await fn(wrap(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}
