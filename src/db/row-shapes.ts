// How a statement's rows are made from the text PostgreSQL sends, on both backends: each column
// decoded by its type's parser, the row made by a function written for the statement's columns,
// and the rows of a REUSE_ROWS statement (db.ts) remembered by their text. The PostgreSQL
// adapter reads rows through the driver (pg-statement.ts), the embedded one through its own
// reader of PGlite's answers (pglite-answer.ts); both make them here, so a row is the same
// object whichever reads it.
import { ReusedRows } from './reused-rows.ts';

/** A column as a row description gives it. */
export interface ShapeField {
  name: string;
  dataTypeID: number;
  format?: string;
}

/** What a statement's rows are made of, once its columns have been described. */
export interface RowShape {
  parsers: ((v: string) => unknown)[];
  make(values: unknown[]): unknown;
  /** A REUSE_ROWS statement's remembered rows (db.ts). */
  reuse?: ReusedRows | undefined;
}

/** A row as it arrives: each column's text, or null. */
export type RawRow = readonly (string | null)[];

/**
 * The row made of `raw`: the remembered object when a REUSE_ROWS statement sent exactly this
 * text before (nothing is decoded then), else decoded column by column. Throws what a column's
 * parser throws.
 */
export function rowOf(shape: RowShape, raw: RawRow): unknown {
  const known = shape.reuse?.known(raw);
  if (known !== undefined) return known;
  const values = new Array<unknown>(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const v = raw[i];
    values[i] = v === null || v === undefined ? null : (shape.parsers[i] as (v: string) => unknown)(v);
  }
  const row = shape.make(values);
  return shape.reuse ? shape.reuse.keep(raw, row) : row;
}

/**
 * The remembered rows of a REUSE_ROWS statement, one set per backend (`scope`: the backends
 * decode some types differently) and shape of its columns (names, types and formats): text
 * remembered under one shape is never read as a row of another (a migration that changed the
 * table while this process ran). A process's connections, and its databases of one backend,
 * share them: a row with the same id and the same text, column by column, is the same row.
 */
const reusedRows = new Map<string, ReusedRows>();
export function reusedRowsOf(scope: string, sql: string, fields: readonly ShapeField[]): ReusedRows {
  const key = `${scope}\0${sql}\0${fields.map((f) => `${f.name}:${f.dataTypeID}:${f.format ?? 'text'}`).join(',')}`;
  let rows = reusedRows.get(key);
  if (!rows) {
    rows = new ReusedRows();
    reusedRows.set(key, rows);
  }
  return rows;
}

/** Makes a row object from a row's values, in the order of the statement's columns. */
type RowMaker = (values: unknown[]) => unknown;

/** Row makers by statement text, with the column names each was made for. */
const rowMakers = new Map<string, { names: string[]; make: RowMaker }>();

/**
 * Rows come as arrays of values and are made into objects here, by a function written once per
 * statement whose body is one object literal with the statement's column names: the rows then
 * share one hidden class and their properties are read as fast as any object's. The pg driver's
 * own objects are copies of a null-prototype object, which V8 keeps as a dictionary (slow to
 * build, slow to read); with a task's 35 columns that was a tenth of the process's time on a
 * 20-task list. The object is the one the drivers make: each column a property, in the columns'
 * order, a repeated name holding the last column's value.
 */
export function rowMaker(sql: string, fields: readonly { name: string }[]): RowMaker {
  const known = rowMakers.get(sql);
  if (known && known.names.length === fields.length && known.names.every((n, i) => n === fields[i]?.name)) {
    return known.make;
  }
  const names = fields.map((f) => f.name);
  // A column named __proto__ would set the prototype in a literal: such rows are built by hand.
  const make: RowMaker = names.includes('__proto__')
    ? (values) => Object.fromEntries(names.map((n, i) => [n, values[i]]))
    : (new Function(
        'v',
        `return {${names.map((n, i) => `${JSON.stringify(n)}: v[${i}]`).join(', ')}};`,
      ) as RowMaker);
  rowMakers.set(sql, { names, make });
  return make;
}
