// One execution of one of the service's statements, as the pg driver's extension point for
// custom queries (an object with submit(), as pg-cursor's): it writes the extended protocol's
// messages itself and makes the answer's rows into objects as they arrive.
//
// Why not the driver's own Query: it asks PostgreSQL to describe the answer's columns at every
// execution and parses that description each time (a task's 35 columns: names, type ids,
// formats; about 4.7 KB of garbage per read, the largest share of a read's allocations), then
// builds a parser per column, keeps the rows as arrays and wraps the whole in an event emitter
// and a promise. A prepared statement's columns cannot change on its connection (PostgreSQL
// refuses to run it if they would: "cached plan must not change result type"), so here they
// are described once per statement and connection, and kept with that connection.
import { createRequire } from 'node:module';

/** The driver's protocol connection, the part used here (pg's lib/connection.js). */
export interface DriverConnection {
  stream: { cork?(): void; uncork?(): void };
  parsedStatements: Record<string, string | undefined>;
  submittedNamedStatements: Record<string, string | undefined>;
  parse(msg: { text: string; name?: string; types?: number[] }): void;
  bind(msg: { portal: string; statement: string; values: unknown[]; valueMapper(v: unknown): unknown }): void;
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

/** What a statement's rows are made of, once its columns have been described. */
export interface RowShape {
  parsers: ((v: string) => unknown)[];
  make(values: unknown[]): unknown;
}

/** How rows are made for a statement, given its described columns (postgres.ts decides). */
export type ShapeOf = (text: string, fields: readonly DriverField[]) => RowShape;

// The driver's own conversion of parameters (dates, arrays, buffers, objects as JSON), which
// its Query uses too; its lib files are part of its package's exports.
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as {
  prepareValue(v: unknown): unknown;
};

/** Row shapes by connection, then statement name. */
const described = new WeakMap<DriverConnection, Map<string, RowShape>>();

export class StatementQuery {
  /** Read by the driver: a named statement is remembered as parsed once PostgreSQL says so. */
  readonly name: string | undefined;
  readonly text: string;
  /** Set by the driver (client.query or the pool) before submit. */
  callback: ((err: Error | null, rows?: unknown[]) => void) | undefined;
  readonly #values: readonly unknown[];
  readonly #shapeOf: ShapeOf;
  #shape: RowShape | undefined;
  #rows: unknown[] = [];
  /** A row that could not be read: reported when PostgreSQL is done with the statement. */
  #failure: Error | undefined;
  #connection: DriverConnection | undefined;

  constructor(text: string, name: string | undefined, values: readonly unknown[], shapeOf: ShapeOf) {
    this.text = text;
    this.name = name;
    this.#values = values;
    this.#shapeOf = shapeOf;
  }

  submit(connection: DriverConnection): null {
    this.#connection = connection;
    const name = this.name ?? '';
    connection.stream.cork?.();
    try {
      const parsed =
        this.name !== undefined &&
        (connection.parsedStatements[name] !== undefined ||
          connection.submittedNamedStatements[name] !== undefined);
      if (!parsed) {
        connection.parse({ text: this.text, name, types: [] });
        if (this.name !== undefined) connection.submittedNamedStatements[name] = this.text;
      }
      try {
        connection.bind({
          portal: '',
          statement: name,
          values: this.#values as unknown[],
          valueMapper: prepareValue,
        });
      } catch (err) {
        // A parameter the driver cannot convert: the message is built before it is written, so
        // nothing of it was sent; the statement stays prepared and the connection usable.
        connection.sync();
        this.#failure = err as Error;
        return null;
      }
      this.#shape = this.name === undefined ? undefined : described.get(connection)?.get(name);
      if (!this.#shape) connection.describe({ type: 'P', name: '' });
      connection.execute({ portal: '' });
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: DriverField[] }): void {
    const shape = this.#shapeOf(this.text, msg.fields);
    this.#shape = shape;
    if (this.name === undefined || !this.#connection) return;
    let byName = described.get(this.#connection);
    if (!byName) {
      byName = new Map();
      described.set(this.#connection, byName);
    }
    byName.set(this.name, shape);
  }

  handleDataRow(msg: { fields: (string | null)[] }): void {
    if (this.#failure) return;
    const shape = this.#shape;
    if (!shape) {
      this.#failure = new Error('a row arrived before its columns were described');
      return;
    }
    const raw = msg.fields;
    const values = new Array<unknown>(raw.length);
    try {
      for (let i = 0; i < raw.length; i++) {
        const v = raw[i];
        values[i] = v === null || v === undefined ? null : (shape.parsers[i] as (v: string) => unknown)(v);
      }
    } catch (err) {
      this.#failure = err as Error;
      return;
    }
    this.#rows.push(shape.make(values));
  }

  handleCommandComplete(): void {}

  handleEmptyQuery(): void {}

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: DriverConnection): void {
    connection.sendCopyFail('No source stream defined');
  }

  handleCopyData(): void {}

  handleError(err: Error): void {
    const failure = this.#failure ?? err;
    this.#failure = undefined;
    this.callback?.(failure);
  }

  handleReadyForQuery(): void {
    if (this.#failure) this.handleError(this.#failure);
    else this.callback?.(null, this.#rows);
  }
}
