/**
 * Wake-ups within one process. A NOTIFY reaches the listeners of every process, this one's
 * included, but only after a round through the database server (its listening connection is
 * another backend, scheduled on its own); work made here can wake this process's own loops at
 * once, when its transaction has committed. The NOTIFY is still sent, for the other
 * processes; a listener that hears the same event both ways acts on the first (see
 * `FirstOfTwo`).
 */
export class LocalSignals {
  readonly #listeners = new Map<string, Set<(payload: string) => void>>();

  /** Calls `onSignal` at each `emit` of `channel` in this process; returns the unsubscribe. */
  on(channel: string, onSignal: (payload: string) => void): () => void {
    let set = this.#listeners.get(channel);
    if (!set) {
      set = new Set();
      this.#listeners.set(channel, set);
    }
    set.add(onSignal);
    return () => set.delete(onSignal);
  }

  /** Call only after the transaction that made the work has committed. */
  emit(channel: string, payload: string): void {
    for (const f of this.#listeners.get(channel) ?? []) f(payload);
  }
}

/**
 * Tells the first hearing of an event (named by a non-empty payload) from the second, for an
 * event that arrives both as a local signal and as its NOTIFY, in either order. Payloads heard
 * only once (NOTIFYs from other processes) are forgotten after `keep` newer ones.
 */
export class FirstOfTwo {
  readonly #heard = new Set<string>();
  readonly #keep: number;

  constructor(keep = 256) {
    this.#keep = keep;
  }

  /** True the first time `payload` is heard (and always for an empty one), false the second. */
  first(payload: string): boolean {
    if (!payload) return true;
    if (this.#heard.delete(payload)) return false;
    this.#heard.add(payload);
    // A Set iterates in insertion order: the oldest goes first.
    if (this.#heard.size > this.#keep) this.#heard.delete(this.#heard.values().next().value as string);
    return true;
  }
}
