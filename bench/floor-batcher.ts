// The batched floor of a create (bench/baselines.ts, POST /items/batched): task-shaped rows
// inserted the way the service batches creates (src/domain/task-create-batcher.ts), so that the
// service's creates are compared with the same work done bare, batched alike.
import { randomUUID } from 'node:crypto';
import { GroupCommit } from '../src/lib/group-commit.ts';

export type Query = (sql: string, params?: unknown[]) => Promise<unknown[]>;

/** The batched create floor's statement: many task-shaped rows in one INSERT, one commit. */
const ITEMS_INSERT = `INSERT INTO bench_items
  (id, organization_id, name, prompt, model, schedule, schedule_time, schedule_days, timezone, status, next_run_at)
  SELECT i, o, n, 'Summarise the week in five bullet points.', 'openai/gpt-4o-mini', 'weekly', '08:30',
         ARRAY['monday','thursday'], 'Europe/Berlin', 'active', now() + interval '3 days'
    FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS x(i, o, n)
  RETURNING *`;
/** As src/domain/task-create-batcher.ts batches: at most this many statements in flight (PostgreSQL)… */
export const FLOOR_BATCH_IN_FLIGHT = 4;
/** …each with at most this many rows. */
const FLOOR_BATCH_MAX = 64;

interface Waiting {
  id: string;
  org: string;
  name: string;
  done: (row: unknown) => void;
  fail: (e: unknown) => void;
}

/**
 * Creates batched the way the service batches them (TaskCreateBatcher, through the same
 * GroupCommit): a create goes out at once while fewer than `inFlight` statements run and none
 * holds its organization, and otherwise joins the next statement.
 */
export function insertBatcher(query: Query, inFlight: number) {
  const batches = new GroupCommit<Waiting>({
    maxInFlight: inFlight,
    maxBatch: FLOOR_BATCH_MAX,
    keyOf: (w) => w.org,
    send: async (batch) => {
      try {
        const rows = await query(ITEMS_INSERT, [
          batch.map((b) => b.id),
          batch.map((b) => b.org),
          batch.map((b) => b.name),
        ]);
        const byId = new Map((rows as { id: string }[]).map((r) => [r.id, r]));
        for (const b of batch) b.done(byId.get(b.id));
      } catch (err) {
        for (const b of batch) b.fail(err);
      }
    },
  });
  return (org: string, name: string) =>
    new Promise<unknown>((done, fail) => batches.add({ id: randomUUID(), org, name, done, fail }));
}
