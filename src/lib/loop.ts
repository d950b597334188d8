// The one wake/sleep/stop loop of every background part (scheduler, run worker, delivery
// dispatcher, usage reporter, maintenance). A part supplies a pass; the loop decides when it
// runs: at start, on a NOTIFY of its channel, on a wake() from the process itself, and at the
// time the pass asked for (never later than the poll interval, which bounds the damage of a
// notification that never arrives). Passes never overlap: wake-ups during a pass merge into one
// more pass after it. Work a pass hands off (a run, a delivery attempt) is tracked, so that
// stop() can give it a grace period and then abort it.

import { CoalescedTask } from './coalesced-task.ts';
import type { Logger } from './logger.ts';

/** What a pass returns: the delay (ms) before the next pass it wants, or undefined for the poll interval. */
type PassResult = number | undefined;

export interface LoopOptions {
  /** Names the part in log lines. */
  name: string;
  /** One look at the part's table; throws to be retried after `retryMs`. */
  pass: () => Promise<PassResult>;
  /** The longest sleep between passes. */
  pollMs: number;
  /** The sleep after a failed pass (default 5 s). */
  retryMs?: number;
  /** The first pass at start (default) or only after `pollMs` (periodic housekeeping). */
  passAtStart?: boolean;
  /**
   * The NOTIFY channel that wakes the loop in every process, with `listen` to subscribe, and
   * `heard` to leave out a notification whose event has already woken it another way.
   */
  channel?: {
    name: string;
    listen: (channel: string, onNotify: (payload: string) => void) => Promise<() => Promise<void>>;
    heard?: (payload: string) => boolean;
  };
  log: Logger;
}

interface InFlight {
  controller: AbortController;
  done: Promise<unknown>;
}

export class Loop {
  readonly #o: LoopOptions;
  readonly #passes: CoalescedTask;
  readonly #inFlight = new Set<InFlight>();
  #timer: NodeJS.Timeout | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  #stopping = false;

  constructor(options: LoopOptions) {
    this.#o = options;
    this.#passes = new CoalescedTask(() => this.#pass());
  }

  async start(): Promise<void> {
    const channel = this.#o.channel;
    if (channel) {
      this.#unlisten = await channel.listen(channel.name, (payload) => {
        if (!channel.heard?.(payload)) this.wake();
      });
    }
    if (this.#o.passAtStart === false) this.#arm(this.#o.pollMs);
    else this.wake();
  }

  /** Asks for a pass as soon as possible (coalesced with one in progress); none once stopping. */
  wake(): void {
    if (!this.#stopping) this.#passes.request();
  }

  /** True from the start of stop(): passes hand off no new work. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /**
   * Work handed off by a pass that outlives it: stop() waits for `done`, and aborts
   * `controller` with the reason 'shutdown' when the grace period is over.
   */
  track(controller: AbortController, done: Promise<unknown>): void {
    const entry = { controller, done };
    this.#inFlight.add(entry);
    void done.finally(() => this.#inFlight.delete(entry));
  }

  /**
   * Stops: no pass starts after this, the current one ends, then tracked work gets `graceMs` to
   * finish before it is aborted; resolves when all of it has ended.
   */
  async stop(graceMs = 0): Promise<void> {
    this.#stopping = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#unlisten?.();
    this.#unlisten = undefined;
    await this.#passes.stop();
    const all = () => Promise.all([...this.#inFlight].map((w) => w.done.catch(() => undefined)));
    if (!this.#inFlight.size) return;
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'grace_over'>((resolve) => {
      timer = setTimeout(() => resolve('grace_over'), graceMs);
    });
    const first = await Promise.race([all().then(() => 'done' as const), graceOver]);
    clearTimeout(timer);
    if (first === 'grace_over') {
      for (const w of this.#inFlight) w.controller.abort('shutdown');
      await all();
    }
  }

  async #pass(): Promise<void> {
    let delay: number;
    try {
      delay = (await this.#o.pass()) ?? this.#o.pollMs;
    } catch (err) {
      this.#o.log.error({ err }, `${this.#o.name} pass failed; retrying`);
      delay = this.#o.retryMs ?? 5_000;
    }
    this.#arm(Math.max(0, Math.min(delay, this.#o.pollMs)));
  }

  #arm(ms: number): void {
    if (this.#stopping) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.wake(), ms);
    this.#timer.unref();
  }
}
