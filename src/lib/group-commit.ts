/**
 * Group commit: items sent to the database several per statement or transaction when they arrive
 * faster than statements complete. Nothing waits for a batch to fill: an item is sent at once
 * while fewer than `maxInFlight` batches are running, and otherwise joins the next batch, which
 * takes everything that queued meanwhile (at most `maxBatch` items, and at most `maxWeight` of
 * their `weight` but for a batch's first item). `send` settles its batch's items itself (it
 * resolves or rejects each one) and must not reject.
 *
 * With `keyOf`, a batch in flight holds the keys of its items, and an item whose key is held
 * waits for that batch to finish, then goes with the others of its key that queued meanwhile.
 * For batches that take a lock per key (an organization's row), this keeps them from queueing
 * on the lock in the database one after another, each with a few items, and from taking every
 * slot in flight while they wait: one batch per key, as large as what arrived.
 */
export class GroupCommit<T> {
  readonly #maxInFlight: number;
  readonly #maxBatch: number;
  readonly #send: (batch: T[]) => Promise<void>;
  readonly #weight: (item: T) => number;
  readonly #maxWeight: number;
  readonly #keyOf: ((item: T) => string) | undefined;
  /** The keys of the batches in flight. */
  readonly #held = new Set<string>();
  #queue: T[] = [];
  #inFlight = 0;

  constructor(o: {
    maxInFlight: number;
    maxBatch: number;
    send: (batch: T[]) => Promise<void>;
    weight?: (item: T) => number;
    maxWeight?: number;
    keyOf?: (item: T) => string;
  }) {
    this.#maxInFlight = Math.max(1, o.maxInFlight);
    this.#maxBatch = o.maxBatch;
    this.#send = o.send;
    this.#weight = o.weight ?? (() => 0);
    this.#maxWeight = o.maxWeight ?? Number.POSITIVE_INFINITY;
    this.#keyOf = o.keyOf;
  }

  add(item: T): void {
    this.#queue.push(item);
    // Every item queued before this one was either sent or found held when the queue was last
    // pumped; an item whose key is held changes nothing, so the queue is not walked for it.
    if (this.#keyOf && this.#held.has(this.#keyOf(item))) return;
    this.#pump();
  }

  #pump(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      const batch = this.#takeBatch();
      if (batch.length === 0) return;
      const keys = this.#keyOf ? new Set(batch.map(this.#keyOf)) : undefined;
      for (const key of keys ?? []) this.#held.add(key);
      this.#inFlight++;
      void this.#send(batch).finally(() => {
        this.#inFlight--;
        for (const key of keys ?? []) this.#held.delete(key);
        this.#pump();
      });
    }
  }

  /**
   * Takes the next batch out of the queue: its items in queue order, passing over those whose
   * key is held, up to the first that would take it past `maxBatch` or `maxWeight`.
   */
  #takeBatch(): T[] {
    const batch: T[] = [];
    const passed: T[] = [];
    let weight = 0;
    let i = 0;
    for (; i < this.#queue.length; i++) {
      const item = this.#queue[i] as T;
      if (this.#keyOf && this.#held.has(this.#keyOf(item))) {
        passed.push(item);
        continue;
      }
      if (batch.length === this.#maxBatch) break;
      weight += this.#weight(item);
      if (batch.length > 0 && weight > this.#maxWeight) break;
      batch.push(item);
    }
    this.#queue = passed.length === 0 ? this.#queue.slice(i) : passed.concat(this.#queue.slice(i));
    return batch;
  }
}
