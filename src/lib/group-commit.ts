/**
 * Group commit: items sent to the database several per statement or transaction when they arrive
 * faster than statements complete. Nothing waits for a batch to fill: an item is sent at once
 * while fewer than `maxInFlight` batches are running, and otherwise joins the next batch, which
 * takes everything that queued meanwhile (at most `maxBatch` items, and at most `maxWeight` of
 * their `weight` but for a batch's first item). `send` settles its batch's items itself (it
 * resolves or rejects each one) and must not reject.
 */
export class GroupCommit<T> {
  readonly #maxInFlight: number;
  readonly #maxBatch: number;
  readonly #send: (batch: T[]) => Promise<void>;
  readonly #weight: (item: T) => number;
  readonly #maxWeight: number;
  #queue: T[] = [];
  #inFlight = 0;

  constructor(o: {
    maxInFlight: number;
    maxBatch: number;
    send: (batch: T[]) => Promise<void>;
    weight?: (item: T) => number;
    maxWeight?: number;
  }) {
    this.#maxInFlight = Math.max(1, o.maxInFlight);
    this.#maxBatch = o.maxBatch;
    this.#send = o.send;
    this.#weight = o.weight ?? (() => 0);
    this.#maxWeight = o.maxWeight ?? Number.POSITIVE_INFINITY;
  }

  add(item: T): void {
    this.#queue.push(item);
    this.#pump();
  }

  #pump(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.#batchLength());
      this.#inFlight++;
      void this.#send(batch).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  /** How many of the queue's first items the next batch takes. */
  #batchLength(): number {
    let weight = 0;
    let n = 0;
    for (const item of this.#queue) {
      if (n === this.#maxBatch) break;
      weight += this.#weight(item);
      if (n > 0 && weight > this.#maxWeight) break;
      n++;
    }
    return n;
  }
}
