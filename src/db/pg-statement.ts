// Statements of the service as the pg driver's extension point for custom queries (an object
// with submit(), as pg-cursor's): it writes the extended protocol's messages itself and makes
// the answer's rows into objects as they arrive. One statement, or several in one pipeline.
//
// Why not the driver's own Query: it asks PostgreSQL to describe the answer's columns at every
// execution and parses that description each time (a task's 35 columns: names, type ids,
// formats; about 4.7 KB of garbage per read, the largest share of a read's allocations), then
// builds a parser per column, keeps the rows as arrays and wraps the whole in an event emitter
// and a promise. A prepared statement's columns cannot change on its connection (PostgreSQL
// refuses to run it if they would: "cached plan must not change result type"), so here they
// are described once per statement and connection, and kept with that connection.
//
// Several statements go as one pipeline: Parse (when the connection has not prepared it),
// Bind, Describe (when not described yet) and Execute of each, then one Sync. PostgreSQL runs
// everything before a Sync in one implicit transaction (each statement with a new snapshot, as
// in a READ COMMITTED transaction), committed at the Sync; after an error it skips the rest up
// to the Sync and rolls the transaction back. One write, one wake-up of the backend, one commit.
import { createRequire } from 'node:module';
import { type RowShape, rowOf } from './row-shapes.ts';

/** The driver's protocol connection, the part used here (pg's lib/connection.js). */
export interface DriverConnection {
  stream: { cork?(): void; uncork?(): void };
  parsedStatements: Record<string, string | undefined>;
  submittedNamedStatements: Record<string, string | undefined>;
  parse(msg: { text: string; name?: string; types?: number[] }): void;
  bind(msg: { portal: string; statement: string; values: unknown[] }): void;
  describe(msg: { type: 'P' | 'S'; name: string }): void;
  execute(msg: { portal: string; rows?: number }): void;
  sync(): void;
  sendCopyFail(message: string): void;
}

/** A column as the driver parses it from a row description. */
export interface DriverField {
  name: string;
  dataTypeID: number;
  format: string;
}

/** How rows are made for a statement, given its described columns (postgres.ts decides). */
export type ShapeOf = (text: string, fields: readonly DriverField[]) => RowShape;

/** One statement: its text, the name it is prepared under (undefined: parsed at each execution), its parameters. */
export interface PipelinedStatement {
  text: string;
  name: string | undefined;
  values: readonly unknown[];
}

// The driver's own conversion of parameters (dates, arrays, buffers, objects as JSON), which
// its Query uses too; its lib files are part of its package's exports.
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as {
  prepareValue(v: unknown): unknown;
};

/** Row shapes by connection, then statement name. */
const described = new WeakMap<DriverConnection, Map<string, RowShape>>();

export class PipelineQuery {
  /** Set by the driver (client.query or the pool) before submit: the rows of each statement. */
  callback: ((err: Error | null, rows?: unknown[][]) => void) | undefined;
  readonly #statements: readonly PipelinedStatement[];
  readonly #shapeOf: ShapeOf;
  readonly #rows: unknown[][];
  /** Each statement's shape: known at submit when its connection described it before. */
  readonly #shapes: (RowShape | undefined)[];
  /** The statements this pipeline sent a Parse for (named ones). */
  readonly #parsing: boolean[];
  /** The statement whose answer is arriving (each ends with CommandComplete). */
  #current = 0;
  /** A row that could not be read, or a parameter that could not be sent: reported at the end. */
  #failure: Error | undefined;
  #connection: DriverConnection | undefined;

  constructor(statements: readonly PipelinedStatement[], shapeOf: ShapeOf) {
    this.#statements = statements;
    this.#shapeOf = shapeOf;
    this.#rows = statements.map(() => []);
    this.#shapes = statements.map(() => undefined);
    this.#parsing = statements.map(() => false);
  }

  /**
   * Read by the driver when PostgreSQL reports a Parse done (it then remembers the statement as
   * prepared on the connection) or refuses a statement (it forgets the Parse it was told of):
   * the statement whose answer is arriving, when this pipeline parsed it. Its Parse's answer
   * comes after the previous statement's CommandComplete and before its own.
   */
  get name(): string | undefined {
    return this.#parsing[this.#current] ? this.#statements[this.#current]?.name : undefined;
  }

  get text(): string {
    return this.#statements[this.#current]?.text ?? '';
  }

  submit(connection: DriverConnection): null {
    this.#connection = connection;
    let values: unknown[][];
    try {
      values = this.#statements.map((s) => s.values.map(prepareValue));
    } catch (err) {
      // A parameter the driver cannot convert: nothing of the pipeline is sent, the connection
      // stays usable (the Sync alone gets the ReadyForQuery that ends this query).
      this.#failure = err as Error;
      connection.sync();
      return null;
    }
    const known = described.get(connection);
    connection.stream.cork?.();
    try {
      for (const [i, s] of this.#statements.entries()) {
        const name = s.name ?? '';
        const prepared =
          s.name !== undefined &&
          (connection.parsedStatements[name] !== undefined ||
            connection.submittedNamedStatements[name] !== undefined);
        if (!prepared) {
          connection.parse({ text: s.text, name, types: [] });
          if (s.name !== undefined) {
            connection.submittedNamedStatements[name] = s.text;
            this.#parsing[i] = true;
          }
        }
        connection.bind({ portal: '', statement: name, values: values[i] as unknown[] });
        const shape = s.name === undefined ? undefined : known?.get(name);
        this.#shapes[i] = shape;
        if (!shape) connection.describe({ type: 'P', name: '' });
        connection.execute({ portal: '' });
      }
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: DriverField[] }): void {
    const s = this.#statements[this.#current];
    if (!s) return;
    const shape = this.#shapeOf(s.text, msg.fields);
    this.#shapes[this.#current] = shape;
    if (s.name === undefined || !this.#connection) return;
    let byName = described.get(this.#connection);
    if (!byName) {
      byName = new Map();
      described.set(this.#connection, byName);
    }
    byName.set(s.name, shape);
  }

  handleDataRow(msg: { fields: (string | null)[] }): void {
    if (this.#failure) return;
    const shape = this.#shapes[this.#current];
    if (!shape) {
      this.#failure = new Error('a row arrived before its columns were described');
      return;
    }
    try {
      this.#rows[this.#current]?.push(rowOf(shape, msg.fields));
    } catch (err) {
      this.#failure = err as Error;
    }
  }

  handleCommandComplete(): void {
    this.#current++;
  }

  handleEmptyQuery(): void {
    this.#current++;
  }

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: DriverConnection): void {
    connection.sendCopyFail('No source stream defined');
  }

  handleCopyData(): void {}

  handleError(err: Error): void {
    // The driver has forgotten the refused statement's Parse (by `name`); the statements after
    // it were skipped, their Parses too, so they are not prepared either.
    const connection = this.#connection;
    if (connection) {
      for (let i = this.#current + 1; i < this.#statements.length; i++) {
        const name = this.#statements[i]?.name;
        if (this.#parsing[i] && name !== undefined) delete connection.submittedNamedStatements[name];
      }
    }
    const failure = this.#failure ?? err;
    this.#failure = undefined;
    this.callback?.(failure);
  }

  handleReadyForQuery(): void {
    if (this.#failure) this.handleError(this.#failure);
    else this.callback?.(null, this.#rows);
  }
}
