import { createHash } from 'node:crypto';
import pg from 'pg';
import {
  type Db,
  isDatabaseUnavailable,
  PLAN_EACH_TIME,
  postgresProfile,
  type Queryable,
  REUSE_ROWS,
  type Statement,
} from './db.ts';
import { type DriverField, type PipelinedStatement, PipelineQuery } from './pg-statement.ts';
import { type RowShape, reusedRowsOf, rowMaker } from './row-shapes.ts';

const INT8_OID = 20;
const NUMERIC_OID = 1700;
const TIMESTAMPTZ_OID = 1184;

const parseAnyTimestamptz = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (v: string) => unknown;

/** The number written in `v` from `start` to `end` (digits only), or NaN. */
function digits(v: string, start: number, end: number): number {
  let n = 0;
  for (let i = start; i < end; i++) {
    const d = v.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return Number.NaN;
    n = n * 10 + d;
  }
  return n;
}

/**
 * A timestamptz as PostgreSQL sends it to a session in UTC (`2026-11-26 09:53:37.123456+00`),
 * read without the driver's general parser and its regular expressions: a page of tasks has
 * three or more per row. The value is the general parser's, milliseconds cut as it cuts them;
 * any other form (another zone, BC, infinity, a year outside 1000–9999) goes to that parser.
 */
export function parseTimestamptz(v: string): unknown {
  const n = v.length;
  if (
    (n !== 22 && (n < 24 || n > 29 || v.charCodeAt(19) !== 46)) ||
    v.charCodeAt(4) !== 45 ||
    v.charCodeAt(7) !== 45 ||
    v.charCodeAt(10) !== 32 ||
    v.charCodeAt(13) !== 58 ||
    v.charCodeAt(16) !== 58 ||
    !v.endsWith('+00')
  ) {
    return parseAnyTimestamptz(v);
  }
  const year = digits(v, 0, 4);
  const fraction = n === 22 ? 0 : digits(v, 20, n - 3);
  const utc = Date.UTC(
    year,
    digits(v, 5, 7) - 1,
    digits(v, 8, 10),
    digits(v, 11, 13),
    digits(v, 14, 16),
    digits(v, 17, 19),
    // As the general parser computes it, so that both cut the same milliseconds.
    n === 22 ? 0 : 1000 * Number.parseFloat(v.slice(19, n - 3)),
  );
  if (year < 1000 || Number.isNaN(utc) || Number.isNaN(fraction)) return parseAnyTimestamptz(v);
  return new Date(utc);
}

const TEXT_ARRAY_OID = 1009;
const parseAnyTextArray = (pg.types.getTypeParser as (oid: number, format: 'text') => (v: string) => unknown)(
  TEXT_ARRAY_OID,
  'text',
);
/** What makes an element of a text[] need the general parser: quotes, escapes, nesting. */
const NOT_PLAIN = /["\\{}]/;

/**
 * A text[] of plain elements (`{monday,thursday}`: no quotes, escapes or nested arrays, as a
 * task's schedule days are) split without the driver's character-by-character parser; an
 * unquoted NULL is null, as there. Anything else goes to that parser.
 */
export function parseTextArray(v: string): unknown {
  if (v.length < 2 || v.charCodeAt(0) !== 123 || v.charCodeAt(v.length - 1) !== 125)
    return parseAnyTextArray(v);
  const inner = v.slice(1, -1);
  // An empty element is one the general parser leaves out: PostgreSQL never writes one unquoted.
  if (NOT_PLAIN.test(inner) || inner.startsWith(',') || inner.endsWith(',') || inner.includes(',,')) {
    return parseAnyTextArray(v);
  }
  if (inner === '') return [];
  return inner.split(',').map((e) => (e === 'NULL' ? null : e));
}

function typeParser(oid: number, format?: string) {
  if (oid === INT8_OID || oid === NUMERIC_OID) return (v: string) => Number(v);
  if (oid === TIMESTAMPTZ_OID && format !== 'binary') return parseTimestamptz;
  if (oid === TEXT_ARRAY_OID && format !== 'binary') return parseTextArray;
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
function statementName(sql: string): string | undefined {
  if (sql.startsWith(PLAN_EACH_TIME)) return undefined;
  return `svc_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
}

/** Statement names by text (a digest is not worked out per execution). */
const statementNames = new Map<string, string | undefined>();
function nameOf(sql: string): string | undefined {
  if (statementNames.has(sql)) return statementNames.get(sql);
  const name = statementName(sql);
  statementNames.set(sql, name);
  return name;
}

/** A statement's rows: its columns' parsers and the maker of its row objects (rowMaker). */
function shapeOf(sql: string, fields: readonly DriverField[]): RowShape {
  return {
    parsers: fields.map((f) => typeParser(f.dataTypeID, f.format || 'text') as (v: string) => unknown),
    make: rowMaker(sql, fields),
    reuse: sql.startsWith(REUSE_ROWS) ? reusedRowsOf('postgres', sql, fields) : undefined,
  };
}

/** The driver's query() as the service calls it: an extension-point query and a callback. */
type SubmitQuery = (query: PipelineQuery, callback: (err: Error | null, rows?: unknown[][]) => void) => void;

function submitted(submit: SubmitQuery, statements: PipelinedStatement[]): Promise<unknown[][]> {
  return new Promise((resolve, reject) => {
    submit(new PipelineQuery(statements, shapeOf), (err, rows) => (err ? reject(err) : resolve(rows ?? [])));
  });
}

/**
 * Statements on a connection of the pool. One PostgreSQL refused (an error it reported, the
 * connection fine) gives its connection back: the pool's own query() closes a connection after
 * any error, so a refused statement (a taken slug, say, which a client can cause at will) cost
 * a new connection, a new backend process, and every statement prepared again on it. Any other
 * failure (the connection lost, the server shutting down, an internal error) closes it, as there.
 * The connection may go back before PostgreSQL has said it is ready again: the driver holds the
 * next statement until it has (and forgets a statement whose preparation was refused).
 */
function submitToPool(pool: pg.Pool): SubmitQuery {
  return (query, callback) => {
    pool.connect((err, client, release) => {
      if (err || !client) {
        callback(err ?? new Error('no database connection'));
        return;
      }
      (client.query as unknown as SubmitQuery)(query, (queryErr, rows) => {
        // By its SQLSTATE (the severity's text may be translated): not a connection's loss or
        // shutdown (isDatabaseUnavailable), nor an internal error of the server (class XX).
        const refused =
          queryErr instanceof pg.DatabaseError &&
          !isDatabaseUnavailable(queryErr) &&
          !String(queryErr.code).startsWith('XX');
        release(queryErr && !refused ? queryErr : undefined);
        callback(queryErr, rows);
      });
    });
  };
}

function wrap(client: pg.Pool | pg.PoolClient, submit: SubmitQuery): Queryable {
  return {
    query<R>(sql: string, params: readonly unknown[] = []) {
      return new Promise<R[]>((resolve, reject) => {
        submit(new PipelineQuery([{ text: sql, name: nameOf(sql), values: params }], shapeOf), (err, rows) =>
          err ? reject(err) : resolve((rows?.[0] ?? []) as R[]),
        );
      });
    },
    async exec(sql: string) {
      await client.query(sql);
    },
  };
}

/**
 * What a batch's statements are planned with, set for its transaction only (set_config's
 * is_local): one generic plan each, made once per connection (the statements batched are writes
 * and reads by keys and arrays of keys, whose plans do not depend on the values, and planning
 * them cost more than running them), and no sequential scans, so that a plan made on small or
 * empty tables (a new installation, statistics of a drained queue) still reaches its rows by
 * their indexes when the tables have grown. As migration 0021 sets them for svc_batch.
 */
const BATCH_SETTINGS = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache_mode,
        set_config('enable_seqscan', 'off', true) AS enable_seqscan`;

/**
 * Batched statements are prepared under names of their own, so that their plans are only ever
 * made under BATCH_SETTINGS (a prepared statement keeps the plan it made, whatever the settings
 * of the executions after it).
 */
const batchNames = new Map<string, string>();
function batchNameOf(sql: string): string {
  let name = batchNames.get(sql);
  if (name === undefined) {
    name = `svc_b_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
    batchNames.set(sql, name);
  }
  return name;
}

/** A batch (Db.batch) as one pipeline: the settings, then its statements, one Sync. */
async function batchOf(
  submit: SubmitQuery,
  statements: readonly Statement[],
): Promise<(Record<string, unknown> | undefined)[]> {
  const rows = await submitted(submit, [
    { text: BATCH_SETTINGS, name: batchNameOf(BATCH_SETTINGS), values: [] },
    ...statements.map((s) => ({ text: s.sql, name: batchNameOf(s.sql), values: s.params })),
  ]);
  return statements.map((_, i) => rows[i + 1]?.[0] as Record<string, unknown> | undefined);
}

export async function openPostgres(
  url: string,
  poolSize: number,
  onError: (err: Error) => void,
): Promise<Db> {
  // Connections stay open once the pool has opened them (pg-pool closes idle ones after 10 s by
  // default). Closed, the next burst of work (a slot's runs, a wave of requests) pays for new
  // backends and prepares and plans every statement again on each; and the connections a burst
  // opened were all closed at once 10 s after it, which held PostgreSQL and the process long
  // enough to delay the run-nows of that moment by 20-45 ms (probes 30 ms apart after a burst of
  // 1,000: their p50 was 4.2-4.8 ms). The pool holds at most SVC_DB_POOL_SIZE connections.
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 0,
  });
  // An idle client that loses its connection (server restart) emits here; without a listener
  // the process would crash. The pool replaces the client on the next checkout.
  pool.on('error', onError);
  // A checked-out connection has no listener of the pool's: one lost while a statement runs
  // fails that statement (its callback, in submitToPool), and this listener keeps the client's
  // 'error' event from ending the process.
  pool.on('connect', (client) => client.on('error', () => undefined));
  const submit = submitToPool(pool);
  const base = wrap(pool, submit);
  return {
    backend: postgresProfile(poolSize),
    query: base.query,
    exec: base.exec,
    batch: (statements) => batchOf(submit, statements),
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
        const result = await fn(wrap(client, client.query.bind(client) as unknown as SubmitQuery));
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
