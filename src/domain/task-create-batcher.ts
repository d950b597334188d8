import { type Db, isDatabaseUnavailable } from '../db/db.ts';
import { type CreatedTask, createTasks, type NewTask, type OrgTaskCaps } from '../db/sql/task-create.ts';
import { GroupCommit } from '../lib/group-commit.ts';
import { PLAN_TASKS_LIMITS } from './plans.ts';

interface Pending {
  task: NewTask;
  resolve(result: CreatedTask): void;
  reject(err: unknown): void;
}

/** Statements of creates in flight at once, at most: the rest of the pool stays for reads. */
const MAX_IN_FLIGHT = 4;
/**
 * Tasks per statement, at most. The statement locks each organization of the batch until it
 * commits, so a batch much larger than what arrives in one statement's time buys nothing.
 */
const MAX_BATCH = 64;

/**
 * Creates tasks through `createTasks`, several per statement when creates arrive faster than
 * statements complete. Nothing waits for a batch to fill: a create is sent at once while fewer
 * than MAX_IN_FLIGHT statements are running, and otherwise joins the next statement, which
 * takes everything that queued meanwhile. A statement holds its organizations until it
 * completes: creates of an organization that one holds wait for it and then go together in
 * the next. Under load, creates of one organization then share one lock and one commit instead
 * of queueing on the organization's row statement by statement, and one organization's flood of
 * creates takes one statement in flight at a time, leaving the others to other organizations.
 *
 * A statement that fails for any other reason than an unreachable database is retried task by
 * task, so that one task that the database refuses fails alone.
 */
export class TaskCreateBatcher {
  readonly #db: Db;
  readonly #caps: OrgTaskCaps;
  readonly #batches: GroupCommit<Pending>;

  constructor(db: Db, caps: OrgTaskCaps) {
    this.#db = db;
    this.#caps = caps;
    this.#batches = new GroupCommit({
      maxInFlight: Math.min(MAX_IN_FLIGHT, db.backend.maxConcurrency),
      maxBatch: MAX_BATCH,
      // One statement per organization in flight: the next one's creates would only queue on
      // its row lock; they wait here instead and go together in one statement.
      keyOf: (p) => p.task.row.organizationId,
      send: (batch) => this.#send(batch),
    });
  }

  create(task: NewTask): Promise<CreatedTask> {
    return new Promise((resolve, reject) => this.#batches.add({ task, resolve, reject }));
  }

  async #send(batch: Pending[]): Promise<void> {
    let results: CreatedTask[];
    try {
      results = await createTasks(
        this.#db,
        batch.map((p) => p.task),
        PLAN_TASKS_LIMITS,
        this.#caps,
      );
    } catch (err) {
      if (batch.length === 1 || isDatabaseUnavailable(err)) {
        for (const p of batch) p.reject(err);
        return;
      }
      await Promise.all(batch.map((p) => this.#send([p])));
      return;
    }
    batch.forEach((p, i) => {
      const result = results[i];
      if (result) p.resolve(result);
      else p.reject(new Error('createTasks returned fewer results than tasks'));
    });
  }
}
