// How a cancel reaches the worker executing the run. A cancel ends the run in the database at
// once (domain/run-control.ts) and sends NOTIFY svc_run_cancel with the run's id, from any
// process sharing the database; the worker holding that run looks the runs it executes up and
// aborts those a cancel ended. Notifications only make it fast: a worker that missed one finds
// out at its next lease renewal, which no longer holds a canceled run (worker.ts, #renew).
import type { Db } from '../db/db.ts';
import { canceledAmong } from '../db/sql/run-cancel.ts';
import { CoalescedTask } from '../lib/coalesced-task.ts';
import type { Logger } from '../lib/logger.ts';

export interface CancelWatchOptions {
  db: Db;
  log: Logger;
  /** The ids of the runs this worker executes now. */
  active: () => string[];
  /** Stops the execution of a run a cancel has ended. */
  abort: (runId: string) => void;
}

export class CancelWatch {
  readonly #o: CancelWatchOptions;
  /** One look at a time; notifications during a look merge into one more. */
  readonly #looks: CoalescedTask;
  #unlisten: (() => Promise<void>) | undefined;

  constructor(options: CancelWatchOptions) {
    this.#o = options;
    this.#looks = new CoalescedTask(() => this.#look());
  }

  async start(): Promise<void> {
    this.#unlisten = await this.#o.db.listen('svc_run_cancel', (runId) => {
      // The payload names the canceled run: other workers' runs cost this one nothing. An empty
      // payload (the listening connection came back, notifications may have been lost) makes it
      // look at all of its runs.
      if (runId === '' || this.#o.active().includes(runId)) this.#looks.request();
    });
  }

  async stop(): Promise<void> {
    await this.#unlisten?.();
    this.#unlisten = undefined;
    await this.#looks.stop();
  }

  async #look(): Promise<void> {
    const ids = this.#o.active();
    if (!ids.length) return;
    try {
      for (const id of await canceledAmong(this.#o.db, ids)) this.#o.abort(id);
    } catch (err) {
      // The lease renewal finds the canceled runs too, a third of a lease period later at most.
      this.#o.log.warn({ err }, 'could not look for canceled runs; the lease renewal will');
    }
  }
}
