import { type Db, isDatabaseUnavailable, type Statement } from '../db/db.ts';
import {
  type EndedRun,
  endedRuns,
  lockRunsAndTasksStatement,
  notifyRunEnds,
  type RunResultRow,
  recordLockedRunEndsStatement,
} from '../db/sql/run-queue.ts';
import type { RunRow } from '../db/sql/runs.ts';
import { type ModelCallUsage, recordModelCallsStatement } from '../db/sql/usage.ts';
import { GroupCommit } from '../lib/group-commit.ts';

/** The run as the worker claimed it: what a batch needs to order its locks. */
type HeldRun = Pick<RunRow, 'id' | 'task_id' | 'organization_id'>;

interface UsageWrite {
  kind: 'usage';
  call: ModelCallUsage;
  resolve(): void;
  reject(err: unknown): void;
}

interface EndWrite {
  kind: 'end';
  run: HeldRun;
  workerId: string;
  result: RunResultRow;
  /** Model calls of the run written with its end (recordEnd). */
  calls: readonly ModelCallUsage[];
  resolve(row: EndedRun | undefined): void;
  reject(err: unknown): void;
}

type Write = UsageWrite | EndWrite;

/** The notifications a committed batch of ends calls for (notifyRunEnds). */
interface Notice {
  deliveries: boolean;
  organizations: string[];
  sent(): void;
}

/**
 * Batches of run writes in flight at once, by default: one. What arrives while a batch commits
 * goes into the next, and the ends of a batch share one statement (recordLockedRunEndsStatement),
 * whose cost is mostly its start, so fewer, larger batches cost the database less per run.
 * Measured with the peers bench's throughput modules (instant model, 3,000 runs, alternated with
 * two in flight and at most 8 writes): database CPU per run 0.37-0.38 ms against 0.50-0.52 at
 * concurrency 8, 0.21-0.22 against 0.30-0.31 at 32; runs/s 15% and 20% more; no change with a
 * 100 ms model. A run's place is freed before its end is written (executionDone), so the wait
 * for the batch in flight holds no worker place.
 */
const MAX_IN_FLIGHT = 1;
/**
 * Writes per batch, at most: a batch's runs count as running (towards SVC_ORG_CONCURRENCY) until
 * it commits, and its statements grow with it.
 */
const MAX_BATCH = 32;
/**
 * Characters of run outputs and errors per batch, at most (but for a batch's first write): an
 * output may be up to SVC_MAX_OUTPUT_CHARS, and a batch's text is held several times over (the
 * request, the database's parameters), so a batch of large outputs is cut short instead.
 */
const MAX_BATCH_CHARS = 1_000_000;

const byId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The ends in rounds whose runs' tasks are distinct, in their order: a task's first end in the
 * first round, its second in the second, and so on (two ends of one task in one statement would
 * not see each other's effect on the task).
 */
function roundsOfDistinctTasks(ends: readonly EndWrite[]): EndWrite[][] {
  const rounds: EndWrite[][] = [];
  const seen = new Map<string, number>();
  for (const e of ends) {
    const k = seen.get(e.run.task_id) ?? 0;
    seen.set(e.run.task_id, k + 1);
    const round = rounds[k] ?? [];
    round.push(e);
    rounds[k] = round;
  }
  return rounds;
}

/**
 * The worker's writes about the runs it holds, a model call's usage and a run's end, several per
 * round trip when they arrive faster than batches commit (group commit): a write is sent at once
 * while fewer than MAX_IN_FLIGHT batches are running, and otherwise joins the next one, which
 * takes everything that queued meanwhile. Each write has exactly the effects it would have
 * alone (a run's end is still conditioned on its lease, run by run); only the round trip, the
 * commit, the locks and the notifications are shared.
 *
 * Every batch is one round trip and one transaction (Db.batch): with usage alone, one
 * statement (recordModelCallsStatement, which locks its runs' rows before their ledger rows); with ends,
 * a statement that takes its runs' rows and
 * then its ending runs' tasks' rows, each in id order
 * (lockRunsAndTasksStatement), then records the ends, those of distinct tasks in one statement
 * (recordLockedRunEndsStatement), which takes the organization rows its `once` completions and
 * pauses update in id order, as schedulers take them; so two batches never lock the same rows in
 * opposite orders (but for two ends of one task in a batch, in two statements, whose
 * organizations may then come out of order: a deadlock is then retried as below). A batch that fails for another reason
 * than an unreachable database (a deadlock with another kind of transaction included) is retried
 * write by write, so that one write the database refuses fails alone; an unreachable database
 * fails every write of the batch, for its caller to retry.
 */
export class RunWriteBatcher {
  readonly #db: Db;
  readonly #orgLimit: number;
  readonly #batches: GroupCommit<Write>;
  readonly #notices: GroupCommit<Notice>;

  /** `maxInFlight`: transactions at once, at most (MAX_IN_FLIGHT within the backend's own bound). */
  constructor(db: Db, orgLimit: number, maxInFlight = MAX_IN_FLIGHT) {
    this.#db = db;
    this.#orgLimit = orgLimit;
    this.#batches = new GroupCommit({
      maxInFlight: Math.min(maxInFlight, db.backend.maxConcurrency),
      maxBatch: MAX_BATCH,
      weight: (w) => (w.kind === 'end' ? (w.result.output?.length ?? 0) + (w.result.error?.length ?? 0) : 0),
      maxWeight: MAX_BATCH_CHARS,
      send: (batch) => this.#send(batch),
    });
    this.#notices = new GroupCommit({
      maxInFlight: 1,
      maxBatch: Number.POSITIVE_INFINITY,
      send: (notices) => this.#sendNotices(notices),
    });
  }

  /** Writes one model call's usage (recordModelCallsStatement): on the ledger and copied to its run. */
  recordUsage(call: ModelCallUsage): Promise<void> {
    return new Promise((resolve, reject) => this.#add({ kind: 'usage', call, resolve, reject }));
  }

  /**
   * Records the end of a run `workerId` holds (recordRunEndAndQueueDeliveries) and sends, once the
   * transaction has committed, the notifications the end calls for (notifyRunEnds): `svc_deliveries`
   * for queued deliveries and, where other processes share the database, `svc_runs` when the
   * run's organization has runs waiting for the place it freed. Resolves to the finished run, or
   * undefined when the lease was no longer this worker's. `calls`, the run's last model calls,
   * are written in the same transaction, before the end and whether or not the lease still
   * holds (as recordUsage would): one commit for the answer and the end it decides. A rejection
   * wrote neither.
   */
  recordEnd(
    run: HeldRun,
    workerId: string,
    result: RunResultRow,
    calls: readonly ModelCallUsage[] = [],
  ): Promise<EndedRun | undefined> {
    return new Promise((resolve, reject) =>
      this.#add({ kind: 'end', run, workerId, result, calls, resolve, reject }),
    );
  }

  #add(write: Write): void {
    this.#batches.add(write);
  }

  /**
   * The batch's writes in one round trip and one transaction (Db.batch): the locks, the
   * usage, then the ends, one statement for the runs of distinct tasks (recordLockedRunEndsStatement);
   * the ends' rows in the order of `ends`.
   */
  async #record(calls: ModelCallUsage[], ends: EndWrite[]): Promise<(EndedRun | undefined)[]> {
    const runIds = [...new Set([...calls.map((c) => c.runId), ...ends.map((e) => e.run.id)])];
    const taskIds = [...new Set(ends.map((e) => e.run.task_id))];
    const statements: Statement[] = [lockRunsAndTasksStatement(runIds.sort(byId), taskIds.sort(byId))];
    if (calls.length) {
      statements.push(
        recordModelCallsStatement(
          calls,
          ends.map((e) => ({ runId: e.run.id, workerId: e.workerId })),
        ),
      );
    }
    const first = statements.length;
    for (const round of roundsOfDistinctTasks(ends)) {
      statements.push(
        recordLockedRunEndsStatement(
          round.map((e) => ({ runId: e.run.id, workerId: e.workerId, result: e.result })),
        ),
      );
    }
    const rows = await this.#db.batch(statements);
    const ended = new Map(rows.slice(first).flatMap((row) => endedRuns(row).map((r) => [r.id, r] as const)));
    return ends.map((e) => ended.get(e.run.id));
  }

  /**
   * The notifications of a batch's ends, in one statement of its own after the commit: a NOTIFY
   * makes its transaction take a database-wide lock from its commit until the commit is flushed,
   * so in the batch's transaction it would serialise the commits of every process's writes.
   */
  #notify(ends: EndWrite[], rows: (EndedRun | undefined)[]): Promise<void> {
    const deliveries = rows.some((r) => r?.delivery_status === 'pending');
    // Without other processes, the worker that ended the run claims again by itself.
    const organizations = this.#db.backend.shared ? [...new Set(ends.map((e) => e.run.organization_id))] : [];
    if (!deliveries && !organizations.length) return Promise.resolve();
    return new Promise((sent) => this.#notices.add({ deliveries, organizations, sent }));
  }

  /**
   * One statement for the notifications of every batch that committed while the previous one
   * was being sent: one NOTIFY of a channel wakes every listener, however many ends it stands for.
   */
  async #sendNotices(notices: Notice[]): Promise<void> {
    const deliveries = notices.some((n) => n.deliveries);
    const organizations = [...new Set(notices.flatMap((n) => n.organizations))];
    // The ends are committed: a notification that could not be sent only delays the work it
    // announces until the next poll.
    await notifyRunEnds(this.#db, deliveries, organizations, this.#orgLimit).catch(() => undefined);
    for (const n of notices) n.sent();
  }

  async #send(batch: Write[]): Promise<void> {
    let ended: (EndedRun | undefined)[];
    const ends = batch
      .filter((w): w is EndWrite => w.kind === 'end')
      .sort(
        (a, b) =>
          byId(a.run.organization_id, b.run.organization_id) ||
          byId(a.run.task_id, b.run.task_id) ||
          byId(a.run.id, b.run.id),
      );
    const usage = batch.filter((w): w is UsageWrite => w.kind === 'usage');
    const calls = [...usage.map((w) => w.call), ...ends.flatMap((e) => e.calls)];
    try {
      ended = ends.length ? await this.#record(calls, ends) : [];
      // Usage alone is one statement, committed by itself (a batch of one: planned once).
      if (!ends.length) await this.#db.batch([recordModelCallsStatement(calls)]);
    } catch (err) {
      if (batch.length === 1 || isDatabaseUnavailable(err)) {
        for (const w of batch) w.reject(err);
        return;
      }
      for (const w of batch) await this.#send([w]);
      return;
    }
    for (const w of usage) w.resolve();
    if (ends.length) await this.#notify(ends, ended);
    ends.forEach((e, i) => {
      e.resolve(ended[i]);
    });
  }
}
