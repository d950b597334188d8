import { setBounded } from '../lib/bounded-map.ts';
import { deepFreeze } from '../lib/frozen.ts';

/**
 * Rows remembered per statement (and shape of its columns). A task row kept is about 3 KB of heap
 * with what is kept with it (its view, JSON text and entity tag; 1,000 of them measured 3.1 MB),
 * so one statement holds about 3 MB at most, whatever the organizations read.
 */
export const MAX_REUSED_ROWS = 1000;

type RawRow = readonly (string | null)[];

/**
 * The rows of a REUSE_ROWS statement (db.ts) on PostgreSQL: for each value of the first column,
 * the text of the last row seen, as PostgreSQL sent it. A row that arrives with the same text,
 * column by column, is the same row: the second time, the row just decoded is frozen and kept;
 * from then on, the kept object is the answer and nothing is decoded. A row seen once, or
 * changed since, costs only its text kept: freezing it and keeping what is worked out from it
 * would cost a read of rows that change every time, or are read once, more than it saves (a
 * 20-task list read with every row new: 60% more CPU when every row was frozen at once). The
 * oldest rows are dropped past MAX_REUSED_ROWS.
 */
export class ReusedRows {
  readonly #rows = new Map<string, { raw: RawRow; row: unknown }>();

  /** The kept object of a row read before with exactly this text, or undefined. */
  known(raw: RawRow): unknown {
    const kept = this.#same(raw);
    return kept?.row;
  }

  /**
   * Remembers the row just decoded from `raw` (which known() did not have) and returns what the
   * caller gets: the row frozen and kept when its text was seen before, else the row as it is.
   */
  keep(raw: RawRow, row: unknown): unknown {
    const key = raw[0];
    if (typeof key !== 'string') return row;
    const kept = this.#rows.get(key);
    if (!kept) {
      setBounded(this.#rows, key, { raw, row: undefined }, MAX_REUSED_ROWS);
      return row;
    }
    // Updated in place rather than deleted and set again: a list's rows replace theirs at
    // every read, and the map's churn cost more than the rows' text. A row already kept was
    // just found different by known(): its text is not compared a second time.
    kept.row = kept.row === undefined && this.#sameText(kept.raw, raw) ? deepFreeze(row) : undefined;
    kept.raw = raw;
    return row;
  }

  get size(): number {
    return this.#rows.size;
  }

  #same(raw: RawRow): { raw: RawRow; row: unknown } | undefined {
    const key = raw[0];
    if (typeof key !== 'string') return undefined;
    const kept = this.#rows.get(key);
    return kept && this.#sameText(kept.raw, raw) ? kept : undefined;
  }

  #sameText(a: RawRow, b: RawRow): boolean {
    if (a.length !== b.length) return false;
    for (let i = 1; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }
}
