import { setBounded } from '../lib/bounded-map.ts';
import { deepFreeze } from '../lib/frozen.ts';

/**
 * Rows remembered per statement (and shape of its columns). A remembered row is a few KB with
 * what is kept with it (its view, JSON text and entity tag), so one statement holds at most a
 * few MB, whatever the organizations read.
 */
export const MAX_REUSED_ROWS = 1000;

type RawRow = readonly (string | null)[];

/**
 * The rows of a REUSE_ROWS statement (db.ts) on PostgreSQL: the last row seen for each value
 * of the first column, with its columns' text as PostgreSQL sent it. A row whose text is the
 * same, column by column, is answered with the remembered object instead of being decoded
 * again: same text from the same statement is the same row. A different text replaces it. The
 * oldest rows are dropped past MAX_REUSED_ROWS.
 */
export class ReusedRows {
  readonly #rows = new Map<string, { raw: RawRow; row: unknown }>();

  /** The remembered object of a row with exactly this text, or undefined. */
  known(raw: RawRow): unknown {
    const key = raw[0];
    if (typeof key !== 'string') return undefined;
    const kept = this.#rows.get(key);
    if (!kept || kept.raw.length !== raw.length) return undefined;
    for (let i = 1; i < raw.length; i++) if (kept.raw[i] !== raw[i]) return undefined;
    return kept.row;
  }

  /** Freezes the row just decoded from `raw`, remembers it, and returns it. */
  keep(raw: RawRow, row: unknown): unknown {
    const key = raw[0];
    deepFreeze(row);
    if (typeof key === 'string') setBounded(this.#rows, key, { raw, row }, MAX_REUSED_ROWS);
    return row;
  }

  get size(): number {
    return this.#rows.size;
  }
}
