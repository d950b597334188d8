import { type PGlite, parse, protocol } from '@electric-sql/pglite';
import { PLAN_EACH_TIME, REUSE_ROWS } from './db.ts';
import { type NotificationSink, PgliteAnswer } from './pglite-answer.ts';
import type { StatementTurns } from './pglite-turns.ts';
import { type RowShape, reusedRowsOf, rowMaker, type ShapeField } from './row-shapes.ts';

/** Distinct statements prepared at most; the service sends a fixed set, far fewer than this. */
const MAX_PREPARED = 1_000;

interface Prepared {
  name: string;
  /** Parameter type OIDs, as the server inferred them (values are serialised by type). */
  paramTypes: number[];
  /** How its rows are made (undefined: it returns none), from its description. */
  shape: RowShape | undefined;
}

/** Execute (all rows) and Sync: the messages after a statement's Bind, the same each time. */
const EXECUTE_AND_SYNC = Buffer.concat([protocol.serialize.execute({}), protocol.serialize.sync()]);
const SYNC = protocol.serialize.sync();

/** PGlite's own lock methods (declared abstract in its interface, implemented by PGlite). */
interface Exclusive {
  _runExclusiveQuery<T>(fn: () => Promise<T>): Promise<T>;
  _runExclusiveTransaction<T>(fn: () => Promise<T>): Promise<T>;
}

/**
 * Named prepared statements on PGlite. Its `query()` parses, analyses, describes and plans a
 * statement every time it runs it, all on this thread; the service sends a fixed set of
 * statements, so each is prepared once (Parse and Describe) and afterwards only bound and
 * executed (PostgreSQL may then reuse its plan too). Measured on a task read: 0.7–0.85 ms with
 * `query()`, 0.22–0.25 ms prepared; a 20-task list 1.4–2.0 → 0.9–1.1 ms. Statements marked
 * PLAN_EACH_TIME still go through `query()`.
 *
 * A statement's columns are described once, when it is prepared (a prepared statement's columns
 * cannot change: PostgreSQL refuses to run it if they would), and each execution is one call
 * into the database with its Bind, Execute and Sync together; its answer is read from the
 * protocol's bytes (pglite-answer.ts), the notifications in it delivered to `notify`.
 *
 * The locks are PGlite's own (the transaction and query mutexes that `query()` takes), so a
 * prepared statement waits for a transaction in progress exactly as `query()` does. Holding
 * them, each statement first lets the event loop turn when the statements before it have held
 * the thread for long (pglite-turns.ts).
 */
export class PgliteStatements {
  readonly #pg: PGlite;
  readonly #turns: StatementTurns;
  readonly #notify: NotificationSink;
  readonly #prepared = new Map<string, Prepared>();
  #named = 0;

  constructor(pg: PGlite, turns: StatementTurns, notify: NotificationSink) {
    this.#pg = pg;
    this.#turns = turns;
    this.#notify = notify;
  }

  /** A statement on its own: it waits for any transaction in progress, as `query()` does. */
  async query<R>(sql: string, params: readonly unknown[]): Promise<R[]> {
    const pg = this.#pg;
    if (!this.#preparable(sql)) {
      // query() takes the locks itself: the turn is taken before them.
      await this.#turns.yieldIfDue();
      return (await pg.query<R>(sql, params as unknown[])).rows;
    }
    if (pg.closed) throw new Error('PGlite is closed');
    const locks = pg as unknown as Exclusive;
    return locks._runExclusiveTransaction(() =>
      locks._runExclusiveQuery(async () => {
        await this.#turns.yieldIfDue();
        const rows = await this.#execute<R>(sql, params);
        await pg.syncToFs();
        return rows;
      }),
    );
  }

  /**
   * A statement of the transaction in progress (`tx` is PGlite's handle for it, used for the
   * statements that are not prepared): the transaction's lock is already held by the caller.
   */
  async queryInTransaction<R>(
    tx: Pick<PGlite, 'query'>,
    sql: string,
    params: readonly unknown[],
  ): Promise<R[]> {
    await this.#turns.yieldIfDue();
    if (!this.#preparable(sql)) return (await tx.query<R>(sql, params as unknown[])).rows;
    const locks = this.#pg as unknown as Exclusive;
    return locks._runExclusiveQuery(() => this.#execute<R>(sql, params));
  }

  #preparable(sql: string): boolean {
    return !sql.startsWith(PLAN_EACH_TIME) && (this.#prepared.has(sql) || this.#prepared.size < MAX_PREPARED);
  }

  async #execute<R>(sql: string, params: readonly unknown[]): Promise<R[]> {
    const pg = this.#pg;
    const statement = this.#prepared.get(sql) ?? (await this.#prepare(sql));
    const values = params.map((value, i) => {
      if (value === null || value === undefined) return null;
      const serializer = pg.serializers[statement.paramTypes[i] ?? 0];
      return serializer ? serializer(value) : String(value);
    });
    const bind = protocol.serialize.bind({ statement: statement.name, values });
    const answer = new PgliteAnswer(statement.shape, this.#notify);
    try {
      await pg.execProtocolRawStream(Buffer.concat([bind, EXECUTE_AND_SYNC]), {
        syncToFs: false,
        onRawData: (part) => answer.read(part),
      });
    } catch (err) {
      // The messages stopped part of the way: a Sync ends the exchange (its answer is not needed).
      await pg.execProtocolRaw(SYNC, { syncToFs: false }).catch(() => undefined);
      throw err;
    }
    if (answer.error) throw answer.error;
    return answer.rows as R[];
  }

  async #prepare(sql: string): Promise<Prepared> {
    const pg = this.#pg;
    // A fresh name each time: one whose Parse succeeded and Describe failed stays taken.
    const name = `svc_${++this.#named}`;
    try {
      await pg.execProtocolStream(protocol.serialize.parse({ name, text: sql }), { syncToFs: false });
      const described = await pg.execProtocolStream(protocol.serialize.describe({ type: 'S', name }), {
        syncToFs: false,
      });
      const columns = described.find((m) => m.name === 'rowDescription') as
        | { fields: readonly ShapeField[] }
        | undefined;
      const prepared = {
        name,
        paramTypes: parse.parseDescribeStatementResults(described),
        shape: columns && this.#shapeOf(sql, columns.fields),
      };
      // Remembered only once the server has it: a statement that fails to parse is not kept.
      this.#prepared.set(sql, prepared);
      return prepared;
    } finally {
      // Ends the extended-protocol exchange, also after an error (which discards the rest).
      await pg.execProtocolStream(SYNC, { syncToFs: false });
    }
  }

  /** Each column decoded by PGlite's parser of its type (the service's own among them, pglite.ts). */
  #shapeOf(sql: string, fields: readonly ShapeField[]): RowShape {
    const parsers = this.#pg.parsers;
    return {
      parsers: fields.map((f) => {
        const parser = parsers[f.dataTypeID];
        return parser ? (v: string) => parser(v, f.dataTypeID) : (v: string) => v;
      }),
      make: rowMaker(sql, fields),
      reuse: sql.startsWith(REUSE_ROWS) ? reusedRowsOf('pglite', sql, fields) : undefined,
    };
  }
}
