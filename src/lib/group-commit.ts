/**
 * Group commit: items sent to the database several per statement or transaction when they arrive
 * faster than statements complete. Nothing waits for a batch to fill: an item is sent at once
 * while fewer than `maxInFlight` batches are running, and otherwise joins the next batch, which
 * takes everything that queued meanwhile (at most `maxBatch`). `send` settles its batch's items
 * itself (it resolves or rejects each one) and must not reject.
 */
export class GroupCommit<T> {
  readonly #maxInFlight: number;
  readonly #maxBatch: number;
  readonly #send: (batch: T[]) => Promise<void>;
  #queue: T[] = [];
  #inFlight = 0;

  constructor(o: { maxInFlight: number; maxBatch: number; send: (batch: T[]) => Promise<void> }) {
    this.#maxInFlight = Math.max(1, o.maxInFlight);
    this.#maxBatch = o.maxBatch;
    this.#send = o.send;
  }

  add(item: T): void {
    this.#queue.push(item);
    this.#pump();
  }

  #pump(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.#maxBatch);
      this.#inFlight++;
      void this.#send(batch).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }
}
