import type { ClaimedRun, ClaimOptions } from '../db/sql/run-claim.ts';

/**
 * A place in this process's worker, reserved for a run about to be created here (run now).
 * Exactly one of `begin` (the run was claimed with `claim`) or `release` must follow.
 */
export interface ReservedRunPlace {
  /** What the creating transaction claims the run with (limit 1: the one run). */
  claim: ClaimOptions;
  begin(claimed: ClaimedRun): void;
  release(): void;
}

/**
 * Run now hands its run to this process's worker when that worker has a free place: the run is
 * created already claimed (src/db/sql/run-now.ts), so it starts without a NOTIFY, a wake-up and
 * a claim round trip of its own. A process without the worker role, or whose worker is full or
 * stopping, reserves nothing, and the run goes through the queue as any other.
 *
 * The worker attaches itself when it starts (the domain does not know the worker; the worker
 * knows the domain).
 */
export class RunHandoff {
  #reserve: (() => ReservedRunPlace | undefined) | undefined;

  /** Returns the detach. */
  attach(reserve: () => ReservedRunPlace | undefined): () => void {
    this.#reserve = reserve;
    return () => {
      if (this.#reserve === reserve) this.#reserve = undefined;
    };
  }

  reserve(): ReservedRunPlace | undefined {
    return this.#reserve?.();
  }
}
