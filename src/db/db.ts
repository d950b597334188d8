/**
 * The one database seam. Everything above it speaks PostgreSQL SQL through `query`/`exec`
 * and `transaction`; the two adapters (embedded PGlite, a PostgreSQL server through `pg`)
 * live below it. Values come back normalised: int8 and numeric as JS numbers, timestamptz as
 * Date, uuid as string.
 */
export interface Queryable {
  /** One parameterised statement; returns its rows. */
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  /** A script of statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

/** A statement of a batch (Db.batch): a constant text of the code and its parameters. */
export interface Statement {
  sql: string;
  params: readonly unknown[];
}

export interface Db extends Queryable {
  readonly backend: BackendProfile;
  /**
   * Several statements in one round trip and one transaction: they run in their order, each
   * seeing what the earlier ones wrote (as in a READ COMMITTED transaction), and an error in one
   * rolls all of them back. Each is planned once per connection, for any values, without
   * sequential scans (its rows are reached by keys, whatever the tables' statistics said when
   * it was planned). Resolves to the first row of each statement, by position (undefined: it
   * returned none). Each must be one that returns rows (a SELECT, or a write with RETURNING):
   * svc_batch refuses the others. PostgreSQL: one pipeline of the extended protocol
   * (postgres.ts); the embedded database: one call of svc_batch (pglite-batch.ts).
   */
  batch(statements: readonly Statement[]): Promise<(Record<string, unknown> | undefined)[]>;
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Calls `onNotify` for every NOTIFY on `channel` (from any process sharing the database) and
   * once more after a lost listening connection comes back, since notifications sent while it
   * was down are gone. Resolves to the function that stops listening.
   */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/**
 * What differs between the backends, as data. Code branches on these properties, never on
 * which adapter it has.
 */
export interface BackendProfile {
  name: 'pglite' | 'postgres';
  /** Other processes may share the database (so in-memory state is never authoritative). */
  shared: boolean;
  /** Statements that may run at the same time (PGlite runs one at a time). */
  maxConcurrency: number;
}

export const PGLITE_PROFILE: BackendProfile = { name: 'pglite', shared: false, maxConcurrency: 1 };
export const postgresProfile = (poolSize: number): BackendProfile => ({
  name: 'postgres',
  shared: true,
  maxConcurrency: poolSize,
});

/**
 * Whether an error means the database cannot be reached right now (connection refused, reset
 * or lost, server shutting down or starting): worth retrying later, unlike a failed statement.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (/^08/.test(code) || /^57P0[123]$/.test(code))) return true;
  if (typeof code === 'string' && ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE'].includes(code))
    return true;
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(
    err.message,
  );
}

/**
 * A transaction PostgreSQL aborted for a conflict with another that it could not otherwise
 * resolve: a deadlock (40P01) or a serialization failure (40001). Nothing of it was applied, and
 * the same request sent again would normally succeed: the writers of the service take their rows
 * in one order, so this is a sign of an order missed, not of the request.
 */
export function isTransientConflict(err: unknown): boolean {
  const code = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  return code === '40P01' || code === '40001';
}

/**
 * A leading comment for statements that must be planned for the parameter values of each
 * execution, never with a cached generic plan (see the PostgreSQL adapter). Harmless elsewhere.
 */
export const PLAN_EACH_TIME = '/* plan each time */';

/**
 * A leading comment for reads whose rows the service reads again and again unchanged (a task
 * polled by a client): a row whose values are those of a row the same statement returned
 * before may come back as that row's very object, deeply frozen and shared by every caller, so
 * that what is worked out from it (a view, its JSON, its entity tag) is worked out once
 * (lib/frozen.ts). A caller never changes a row of such a statement (their read functions
 * return read-only types), and the statement's first column tells its rows apart (an id).
 * Both backends compare rows by their text as it arrives, before decoding it (reused-rows.ts,
 * row-shapes.ts); on the embedded database, statements not prepared (pglite-statements.ts)
 * return new objects every time.
 */
export const REUSE_ROWS = '/* reuse rows */';
