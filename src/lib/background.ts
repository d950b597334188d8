// The registry of a process's background parts: startService adds each part the process's roles
// call for (scheduler, run worker, delivery dispatcher, usage reporter, maintenance, the key
// cache's listener), and the registry owns their start and stop order. A new kind of background
// work is a Loop (lib/loop.ts) over a table, added here with its stop stage.

/** Anything with a start and a stop that takes a grace period (a Loop, or a part built on one). */
export interface BackgroundPart {
  start(): Promise<void>;
  stop(graceMs: number): Promise<void>;
}

/**
 * When a part stops. `producer`: it creates work for others (the scheduler) or is housekeeping,
 * so it stops first. `consumer`: it finishes work in flight (runs, deliveries, reports), given
 * the grace period, while the HTTP server drains. `listener`: it keeps caches true for requests
 * in flight, so it stops last.
 */
type StopStage = 'producer' | 'consumer' | 'listener';

const STAGES: readonly StopStage[] = ['producer', 'consumer', 'listener'];

interface Entry {
  name: string;
  part: BackgroundPart;
  stage: StopStage;
  /** Started even when the loops are not (tests that drive the scheduler and worker by hand). */
  always: boolean;
  started: boolean;
}

export class BackgroundRegistry {
  readonly #entries: Entry[] = [];

  add(name: string, part: BackgroundPart, o: { stage: StopStage; always?: boolean }): void {
    this.#entries.push({ name, part, stage: o.stage, always: o.always ?? false, started: false });
  }

  /**
   * Starts the parts in the order they were added; with `loops` false only those marked
   * `always`. A part that fails to start fails the whole start; stop() then stops those started.
   */
  async start(o: { loops: boolean }): Promise<void> {
    for (const e of this.#entries) {
      if (e.started || (!o.loops && !e.always)) continue;
      await e.part.start();
      e.started = true;
    }
  }

  /**
   * Stops the started parts stage by stage (each stage's parts together); `alongsideConsumers`
   * runs with the consumer stage (the HTTP server closing while runs in flight finish).
   */
  async stop(graceMs: number, alongsideConsumers?: () => Promise<unknown>): Promise<void> {
    // Every part is stopped even when another's stop fails; the first failure is thrown after.
    const failures: unknown[] = [];
    for (const stage of STAGES) {
      const parts = this.#entries.filter((e) => e.started && e.stage === stage);
      const settled = await Promise.allSettled([
        ...parts.map(async (e) => {
          e.started = false;
          await e.part.stop(graceMs);
        }),
        ...(stage === 'consumer' && alongsideConsumers ? [alongsideConsumers()] : []),
      ]);
      for (const s of settled) if (s.status === 'rejected') failures.push(s.reason);
    }
    if (failures.length) throw failures[0];
  }
}
