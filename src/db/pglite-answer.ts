// The embedded database's answer to one prepared statement, read from the protocol's bytes as
// PGlite writes them. PGlite's own reader copies every column of every row into an ArrayBuffer
// of its own before decoding it (15-20% of a 20-task list's CPU in a CPU profile), and builds
// each row through Object.fromEntries; here the answer is copied once, its messages read by the
// pg driver's parser (pg-protocol, text decoded straight from the bytes), and its rows made as
// the PostgreSQL adapter makes them (row-shapes.ts), remembered ones included.
import type { BackendMessage } from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
import { type RawRow, type RowShape, rowOf } from './row-shapes.ts';

/** Delivers a notification that arrived in an answer to the process's listeners of its channel. */
export type NotificationSink = (channel: string, payload: string) => void;

export class PgliteAnswer {
  readonly rows: unknown[] = [];
  /** What PostgreSQL refused, or a row that could not be decoded: the statement's failure. */
  error: Error | undefined;
  readonly #parser = new Parser();
  readonly #shape: RowShape | undefined;
  readonly #notify: NotificationSink;

  /** `shape`: the statement's columns (undefined: it returns no rows). */
  constructor(shape: RowShape | undefined, notify: NotificationSink) {
    this.#shape = shape;
    this.#notify = notify;
  }

  /**
   * A part of the answer as PGlite hands it over: a view of its WebAssembly memory, valid only
   * during the call, so it is copied (the parser keeps an incomplete message's bytes for the
   * next part).
   */
  read(part: Uint8Array): void {
    this.#parser.parse(Buffer.from(part), (message) => this.#message(message));
  }

  #message(message: BackendMessage): void {
    switch (message.name) {
      case 'dataRow':
        this.#row((message as unknown as { fields: RawRow }).fields);
        return;
      case 'error':
        this.error ??= message as unknown as Error;
        return;
      case 'notification': {
        const { channel, payload } = message as unknown as { channel: string; payload: string };
        this.#notify(channel, payload);
        return;
      }
      default:
        // Bind and command completion, notices, the ReadyForQuery that ends the answer.
        return;
    }
  }

  #row(raw: RawRow): void {
    if (this.error) return;
    if (!this.#shape) {
      this.error = new Error('a row arrived for a statement described as returning none');
      return;
    }
    try {
      this.rows.push(rowOf(this.#shape, raw));
    } catch (err) {
      this.error = err as Error;
    }
  }
}
