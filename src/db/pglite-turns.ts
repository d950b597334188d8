// Turns of the event loop between the embedded database's statements.
//
// PGlite executes each statement synchronously on this thread, so statements sent together run
// back to back while the event loop waits. What only a turn of the loop does then waits too:
// reading requests, and accepting connections, which libuv does one per turn (libuv pull request
// 3696, "unix: don't accept() connections in a loop": the next one waits for the next poll).
// Under 50 concurrent 20-task lists a turn lasted 60-100 ms, so 50 new connections were accepted
// one per turn and the last one's first request waited 2.5-3.4 s (strace of the service: one
// accept4 every 60-100 ms). So a statement that finds the statements before it have held the
// thread for TURN_BUDGET_MS since the loop last turned first lets it turn once (setImmediate:
// the poll phase reads ready sockets and accepts a connection, then the check phase resumes
// it). It waits holding PGlite's lock, so statements keep their order.

/** How long statements may hold the thread back to back before the event loop gets a turn. */
export const TURN_BUDGET_MS = 5;

/**
 * Resolves in the event loop's check phase. A statement started straight from a request (an I/O
 * callback) would run inside the poll phase, and under load a poll phase then lasts as long as
 * the statements it starts: sockets that became readable meanwhile are served in an order that
 * starves some of them (the same happens to a bare Node server doing 3 ms of synchronous work
 * per request). Waiting for the check phase first lets the poll phase read every ready request,
 * so statements start in the order requests arrived.
 */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class StatementTurns {
  /** Statements and transactions that have entered and not left. */
  #pending = 0;
  /** When the statements holding the thread back to back started (or last let the loop turn). */
  #since = 0;

  /** `op` (a statement or a transaction) once the loop is in its check phase. */
  async run<T>(op: () => Promise<T>): Promise<T> {
    const idle = this.#pending++ === 0;
    try {
      await nextTurn();
      // Statements queued behind others continue their run; one that found none starts one.
      if (idle) this.#since = performance.now();
      return await op();
    } finally {
      this.#pending--;
    }
  }

  /** Called by a statement that holds the database, before it executes. */
  async yieldIfDue(): Promise<void> {
    if (performance.now() - this.#since <= TURN_BUDGET_MS) return;
    await nextTurn();
    this.#since = performance.now();
  }
}
