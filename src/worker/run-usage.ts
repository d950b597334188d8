import type { RunRow } from '../db/sql/runs.ts';
import type { ModelCallUsage } from '../db/sql/usage.ts';
import { newId } from '../lib/ids.ts';
import type { Logger } from '../lib/logger.ts';
import type { CallUsage, RunResult } from '../runner/executor.ts';

/**
 * Bounds on one model call's usage as recorded: a provider's figures are its own claims, and one
 * that is not a number, negative or absurd must neither fail the write nor swell the bill.
 */
export const MAX_CALL_TOKENS = 10_000_000;
export const MAX_CALL_COST_CENTS = 100_000;

/** A figure as recorded: a finite number within [0, max], else 0 (not a number) or max. */
function bounded(value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) return 0;
  return Math.min(value, max);
}

/**
 * One execution's model-call usage, call by call as the executor reports it: each call bounded,
 * given the id that makes a retried write count once, and written at once (`write`, which never
 * rejects), before the executor acts on the answer. But the calls reported after the execution's
 * last answer (executionDone: no model call, tool call or source follows it) are carried to the
 * run's end and written in its transaction (RunWriteBatcher.recordEnd), one commit for the
 * answer and the end it decides, saving the ledger a transaction per run. The window in which a
 * crash loses them is the same: from the answer to the next commit. A run that does not reach
 * its end's write (canceled, lease lost, shutdown, an executor that threw), or whose end's write
 * failed, has them written alone (flush, which the worker calls whatever happened).
 */
export class RunUsage {
  /** What the executor reported, summed as reported (its totals are compared with them). */
  readonly reported = { tokensUsed: 0, costCents: 0 };
  readonly #run: RunRow;
  readonly #write: (call: ModelCallUsage) => Promise<void>;
  readonly #log: Logger;
  #lastAnswered = false;
  #carried: ModelCallUsage[] = [];

  constructor(run: RunRow, write: (call: ModelCallUsage) => Promise<void>, log: Logger) {
    this.#run = run;
    this.#write = write;
    this.#log = log;
  }

  /** The execution's last answer has arrived: the calls reported from now on go with the end. */
  lastAnswered(): void {
    this.#lastAnswered = true;
  }

  /** One call's usage (RunJob.recordUsage). */
  async record(reported: CallUsage): Promise<void> {
    const usage = {
      providerCallId: reported.providerCallId,
      tokensUsed: Math.round(bounded(reported.tokensUsed, MAX_CALL_TOKENS)),
      costCents: bounded(reported.costCents, MAX_CALL_COST_CENTS),
    };
    if (usage.tokensUsed !== reported.tokensUsed || usage.costCents !== reported.costCents) {
      this.#log.warn(
        { runId: this.#run.id, reported, recorded: usage },
        'model call usage out of bounds; recorded within them',
      );
    }
    this.reported.tokensUsed += reported.tokensUsed;
    this.reported.costCents += reported.costCents;
    const call = { id: newId(), runId: this.#run.id, ...usage };
    if (this.#lastAnswered) this.#carried.push(call);
    else await this.#write(call);
  }

  /** What the executor's totals hold beyond the calls it reported itself, as one more call. */
  async recordRemainder(result: RunResult): Promise<void> {
    // Not a number (the totals of a provider's nonsense figures) counts as nothing left.
    const tokensUsed = Math.round(bounded(result.tokensUsed - this.reported.tokensUsed, Number.MAX_VALUE));
    // Sums of fractional cents in another order differ in the last bits, not by a real amount.
    const left = bounded(result.costCents - this.reported.costCents, Number.MAX_VALUE);
    const costCents = left > 1e-9 ? left : 0;
    if (tokensUsed > 0 || costCents > 0) {
      this.#log.info({ runId: this.#run.id, tokensUsed, costCents }, 'usage recorded from the run totals');
      await this.record({ providerCallId: null, tokensUsed, costCents });
    }
  }

  /**
   * Writes the run's end (`write`) with the calls carried to it; they are carried no more once
   * it resolved. If it rejects, neither was written and the calls stay for flush.
   */
  async withEnd<T>(write: (calls: readonly ModelCallUsage[]) => Promise<T>): Promise<T> {
    const calls = [...this.#carried];
    const written = await write(calls);
    this.#carried = this.#carried.filter((c) => !calls.includes(c));
    return written;
  }

  /** Writes the calls still carried, alone, one after the other. */
  async flush(): Promise<void> {
    for (const call of this.#carried.splice(0)) await this.#write(call);
  }
}
