/**
 * Runs an async pass on demand, never two at once: a request that arrives while a pass is
 * running makes exactly one more pass run after it (requests in between merge into that one).
 * Wake-ups can come from timers, notifications and finished work at any moment; this keeps
 * them from piling up or racing each other.
 */
export class CoalescedTask {
  readonly #pass: () => Promise<void>;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(pass: () => Promise<void>) {
    this.#pass = pass;
  }

  /** Asks for a pass as soon as possible. */
  request(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
    });
  }

  /** No pass starts after this; resolves when the current one (if any) has ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#running;
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      await this.#pass();
    } while (this.#again && !this.#stopped);
  }
}
