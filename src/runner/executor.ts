import type { RunContextRow } from '../db/sql/run-context.ts';
import type { RunRow } from '../db/sql/runs.ts';

/** The usage of one model call, as the provider reported it. */
export interface CallUsage {
  /** The provider's id of the answer, when it gave one. */
  providerCallId: string | null;
  tokensUsed: number;
  costCents: number;
}

/** One run handed to an executor: the claimed run and its task's context. */
export interface RunJob {
  run: RunRow;
  context: RunContextRow;
  /** When execution started (the worker's "now"). */
  startedAt: Date;
  /**
   * Records one model call's usage on the run's ledger at once, whatever then happens to the
   * run. The executor calls it as soon as a call's usage has arrived and waits for it before
   * acting on the answer; it never rejects (a write that failed for good is logged).
   */
  recordUsage(usage: CallUsage): Promise<void>;
  /**
   * The execution needs its place no more: the model's last answer has arrived and no source is
   * open, so what is left is recording (the answer's usage first, then the result). The worker
   * gives the place to the next run at once, so that claiming it overlaps the recording.
   * Called at most once, optional for an executor.
   */
  executionDone?(): void;
}

/**
 * Why a run failed, as a value: the worker renders each kind with an exhaustive switch.
 * - not_configured: the service lacks configuration (e.g. no model provider key);
 * - invalid_task: the task cannot run as it stands (unknown model, a skill's missing source);
 * - source_error: an attached source could not be connected (unreachable, auth refused, ...);
 * - provider_error: the model provider refused or failed after retries;
 * - step_limit: the model was still calling tools when the run's step limit was reached;
 * - output_limit: an answer calling tools passed the limit of an answer and was stopped;
 * - timeout: the run exceeded its time limit;
 * - cost_limit: the run reached its task's maxCostCentsPerRun (or could not pay for a call);
 * - output_check: the final output failed the task's outputSchema or requiredTools.
 */
export type RunErrorType =
  | 'not_configured'
  | 'invalid_task'
  | 'source_error'
  | 'provider_error'
  | 'step_limit'
  | 'output_limit'
  | 'timeout'
  | 'cost_limit'
  | 'output_check';

export type RunResult =
  | { ok: true; output: string; tokensUsed: number; costCents: number }
  | {
      ok: false;
      errorType: RunErrorType;
      message: string;
      tokensUsed: number;
      costCents: number;
      /** What the model produced, when the run failed a check after answering (recorded all the same). */
      output?: string | undefined;
    };

/**
 * Executes a run. Expected failures are returned as values; `signal` aborts the execution when
 * the worker loses the run's lease, shuts down, or the run times out (the executor then stops
 * promptly; what it returns is ignored).
 */
export interface RunExecutor {
  execute(job: RunJob, signal: AbortSignal): Promise<RunResult>;
}
