// Canceling a run: one statement ends it, whatever worker holds it (see docs/architecture.md,
// "How a cancel reaches a run"). The worker executing it learns of it from NOTIFY
// svc_run_cancel, or, failing that, from its next lease renewal, and stops; it writes nothing
// more to the run but the usage of model answers it had already received.
import type { Queryable } from '../db.ts';
import type { RunRow } from './runs.ts';

/** When the run was canceled: the worker's manual clock in tests, else the database's clock. */
const AT = 'coalesce($4::timestamptz, statement_timestamp())';

// Built once (statements are named by their text).
const CANCEL_RUN = `WITH run AS (
       UPDATE runs r SET status = 'failed', error = $3, canceled_at = ${AT}, completed_at = ${AT},
              -- Usage recorded so far (recordModelCallsStatement); later answers are copied as they are recorded.
              cost_cents = greatest(r.cost_cents, coalesce((SELECT u.cost_cents FROM usage_ledger u WHERE u.run_id = r.id), 0)),
              tokens_used = greatest(r.tokens_used, coalesce((SELECT u.tokens_used FROM usage_ledger u WHERE u.run_id = r.id), 0)),
              duration_ms = CASE WHEN r.started_at IS NULL THEN NULL
                                 ELSE greatest(0, round(extract(epoch FROM (${AT} - r.started_at)) * 1000))::int END,
              lease_owner = NULL, lease_expires_at = NULL
        WHERE r.id = $1 AND r.organization_id = $2 AND r.status IN ('pending', 'running')
       RETURNING r.*
     ), ledger AS (
       UPDATE usage_ledger u SET status = 'failed' FROM run WHERE u.run_id = run.id
     ), once_done AS (
       -- Like any end of a one-off task's scheduled run: the task has no further slot.
       UPDATE tasks t SET status = 'completed', next_run_at = NULL, updated_at = ${AT}
         FROM run
        WHERE t.id = run.task_id AND run.trigger = 'schedule' AND t.status = 'active'
          AND t.schedule = 'once' AND t.cron_expression IS NULL
     )
     SELECT * FROM run`;

/**
 * Ends one of the organization's pending or running runs as canceled: `failed` with `error`,
 * `canceled_at`, the usage its ledger row has gathered, its lease cleared; no delivery is
 * queued. Returns the canceled run (its `started_at` is set when it was running: a claim sets
 * it, a return to the queue clears it), or undefined when no such run was pending or running.
 */
export async function cancelRunRow(
  db: Queryable,
  organizationId: string,
  runId: string,
  error: string,
  at: Date | null,
): Promise<RunRow | undefined> {
  const [row] = await db.query<RunRow>(CANCEL_RUN, [runId, organizationId, error, at]);
  return row;
}

/** Of these runs, those that a cancel ended (asked by the worker holding them). */
export async function canceledAmong(db: Queryable, runIds: readonly string[]): Promise<Set<string>> {
  if (!runIds.length) return new Set();
  const rows = await db.query<{ id: string }>(
    'SELECT id FROM runs WHERE id = ANY($1::uuid[]) AND canceled_at IS NOT NULL',
    [runIds],
  );
  return new Set(rows.map((r) => r.id));
}
