import type { Queryable } from '../db.ts';
import {
  type ClaimableTable,
  claimLeased,
  recoverExpiredLeased,
  releaseLeased,
  settleLeased,
} from './leased-jobs.ts';
import type { RunRow } from './runs.ts';
import type { NoticeKind } from './task-notices.ts';

/** `suppressed`: a run's destination it was not sent to (the task's deliverOn); never attempted. */
export type DeliveryStatus = 'pending' | 'sending' | 'delivered' | 'failed' | 'suppressed';

export interface DeliveryRow {
  id: string;
  organization_id: string;
  /** The run delivered; null for a task notice. */
  run_id: string | null;
  /** `run`, or the kind of a task notice (task-notices.ts). */
  kind: 'run' | NoticeKind;
  /** The task of a notice (null for a run's delivery). */
  task_id: string | null;
  /** What a notice says (its kind's payload). */
  payload: Record<string, unknown> | null;
  /** deliverOn `change`: the run whose output this run's diff is against. */
  previous_run_id: string | null;
  destination_id: string | null;
  channel: 'email' | 'sms' | 'webhook';
  target: string;
  label: string | null;
  position: number;
  status: DeliveryStatus;
  attempts: number;
  round_attempts: number;
  next_attempt_at: Date | null;
  lease_owner: string | null;
  lease_expires_at: Date | null;
  last_error: string | null;
  delivered_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface AttemptRow {
  attempt: number;
  started_at: string;
  duration_ms: number;
  outcome: 'delivered' | 'failed';
  status_code: number | null;
  error: string | null;
  response: string | null;
}

/**
 * The deliveries table as a leased-job table: `pending` jobs are claimed when due and become
 * `sending`; one given back (released or recovered) is `pending` again, due at once.
 */
const DELIVERIES: ClaimableTable = {
  table: 'deliveries',
  claimable: `status = 'pending' AND next_attempt_at <= $now`,
  order: 'next_attempt_at, id',
  held: `status = 'sending'`,
  onClaim: `status = 'sending', attempts = attempts + 1, round_attempts = round_attempts + 1, updated_at = $now`,
  onReturn: `status = 'pending', next_attempt_at = $now, updated_at = $now`,
  // Released untried: the attempt does not count.
  onRelease: 'attempts = attempts - 1, round_attempts = round_attempts - 1',
};

/**
 * Deliveries left `sending` by a dispatcher that stopped (crash, kill) go back to `pending`, due
 * at once. The attempt in flight may have reached the receiver: delivery is at least once, and
 * the stable `webhook-id` lets a webhook receiver drop the repeat.
 */
export async function recoverExpiredDeliveries(db: Queryable, now: Date): Promise<number> {
  return (await recoverExpiredLeased(db, DELIVERIES, now)).length;
}

/** Claims up to `limit` due deliveries under a lease, oldest due first. */
export function claimDeliveries(
  tx: Queryable,
  o: { owner: string; now: Date; leaseMs: number; limit: number },
): Promise<DeliveryRow[]> {
  return claimLeased<DeliveryRow>(tx, DELIVERIES, o);
}

/** When the dispatcher next has something to do: the nearest due delivery or lease expiry. */
export async function nearestDeliveryAt(db: Queryable): Promise<Date | undefined> {
  const [row] = await db.query<{ at: Date | null }>(
    `SELECT least(
       (SELECT min(next_attempt_at) FROM deliveries WHERE status = 'pending'),
       (SELECT min(lease_expires_at) FROM deliveries WHERE status = 'sending')) AS at`,
  );
  return row?.at ?? undefined;
}

/**
 * The run's deliveryStatus from its deliveries: pending while any is pending or sending, failed
 * when any failed, delivered when all were. The caller holds the run's row lock, so that two
 * deliveries of one run finishing at once both see each other's outcome.
 */
async function refreshRunDeliveryStatus(tx: Queryable, runId: string): Promise<void> {
  await tx.query(
    `UPDATE runs SET delivery_status = CASE
       WHEN EXISTS (SELECT 1 FROM deliveries WHERE run_id = $1 AND status IN ('pending', 'sending')) THEN 'pending'
       WHEN EXISTS (SELECT 1 FROM deliveries WHERE run_id = $1 AND status = 'failed') THEN 'failed'
       ELSE 'delivered' END
      WHERE id = $1 AND EXISTS (SELECT 1 FROM deliveries WHERE run_id = $1)`,
    [runId],
  );
}

export interface AttemptRecord {
  deliveryId: string;
  /** The run delivered; null for a task notice. */
  runId: string | null;
  owner: string;
  attempt: number;
  startedAt: Date;
  durationMs: number;
  outcome: 'delivered' | 'failed';
  statusCode: number | undefined;
  error: string | undefined;
  response: string | undefined;
  /** What the delivery becomes: delivered, failed for good, or pending again at `nextAttemptAt`. */
  next: { status: 'delivered' } | { status: 'failed' } | { status: 'pending'; nextAttemptAt: Date };
  now: Date;
}

/**
 * Attempts kept in a delivery's log: the latest ones. A round of retries is at most 21 attempts
 * (SVC_DELIVERY_RETRY_SCHEDULE: at most 20 retries), but a redelivery starts another round, and
 * a receiver that fails at once (410 Gone) makes each redelivery one more attempt: without a
 * bound, an organization could grow one run's log, and the answer of GET /runs/{id}, without
 * end. The delivery's own count of attempts goes on; its attempts keep their numbers.
 */
export const MAX_ATTEMPTS_KEPT = 50;

/**
 * Records one attempt and its consequence in one transaction, only while `owner` still holds
 * the delivery (a dispatcher whose lease expired records nothing). Returns whether it did. The
 * log keeps the latest MAX_ATTEMPTS_KEPT attempts.
 */
export async function recordAttempt(tx: Queryable, r: AttemptRecord): Promise<boolean> {
  // Lock order: the run first, then its delivery (as redelivery does).
  if (r.runId) await tx.query('SELECT 1 FROM runs WHERE id = $1 FOR UPDATE', [r.runId]);
  const settled = await settleLeased(tx, DELIVERIES, {
    id: r.deliveryId,
    owner: r.owner,
    assignments: `status = $3, next_attempt_at = $4, last_error = $5,
                  delivered_at = CASE WHEN $3 = 'delivered' THEN $6::timestamptz END, updated_at = $6`,
    values: [
      r.next.status,
      r.next.status === 'pending' ? r.next.nextAttemptAt : null,
      r.outcome === 'failed' ? (r.error ?? 'failed') : null,
      r.now,
    ],
  });
  if (!settled) return false;
  await tx.query(
    `INSERT INTO delivery_attempts (delivery_id, attempt, started_at, duration_ms, outcome, status_code, error, response)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      r.deliveryId,
      r.attempt,
      r.startedAt,
      r.durationMs,
      r.outcome,
      r.statusCode ?? null,
      r.error ?? null,
      r.response ?? null,
    ],
  );
  // Attempts are numbered by the delivery's count (a claim whose process died leaves a gap):
  // those MAX_ATTEMPTS_KEPT or more behind this one leave the log, so it never holds more.
  if (r.attempt > MAX_ATTEMPTS_KEPT) {
    await tx.query('DELETE FROM delivery_attempts WHERE delivery_id = $1 AND attempt <= $2', [
      r.deliveryId,
      r.attempt - MAX_ATTEMPTS_KEPT,
    ]);
  }
  if (r.runId) await refreshRunDeliveryStatus(tx, r.runId);
  return true;
}

/** Gives a claimed delivery back untried (shutdown): pending again, the attempt not counted. */
export async function releaseDelivery(
  db: Queryable,
  deliveryId: string,
  owner: string,
  now: Date,
): Promise<void> {
  await releaseLeased(db, DELIVERIES, { id: deliveryId, owner, now });
}

/**
 * A delivery of a run as read with the run (findRunWithDeliveries): what the API shows of it,
 * its times as JSON gives them (ISO 8601 text).
 */
export interface RunDeliveryRow
  extends Pick<
    DeliveryRow,
    'id' | 'channel' | 'target' | 'label' | 'status' | 'destination_id' | 'last_error'
  > {
  next_attempt_at: string | null;
  delivered_at: string | null;
  attempt_log: AttemptRow[];
}

/**
 * One run of the organization with its deliveries in order, each with its attempts oldest
 * first, in one statement: one round trip, and one snapshot, so the run's delivery status and
 * its deliveries agree (its end queues them in its own transaction). Undefined when the run is
 * not the organization's.
 */
export async function findRunWithDeliveries(
  db: Queryable,
  organizationId: string,
  runId: string,
): Promise<(RunRow & { deliveries: RunDeliveryRow[] }) | undefined> {
  const [row] = await db.query<RunRow & { deliveries: RunDeliveryRow[] }>(
    `SELECT r.*, coalesce((SELECT json_agg(json_build_object(
               'id', d.id, 'channel', d.channel, 'target', d.target, 'label', d.label,
               'status', d.status, 'destination_id', d.destination_id, 'last_error', d.last_error,
               'next_attempt_at', d.next_attempt_at, 'delivered_at', d.delivered_at,
               'attempt_log', coalesce((SELECT json_agg(json_build_object(
                   'attempt', a.attempt, 'started_at', a.started_at, 'duration_ms', a.duration_ms,
                   'outcome', a.outcome, 'status_code', a.status_code, 'error', a.error, 'response', a.response)
                   ORDER BY a.attempt)
                 FROM delivery_attempts a WHERE a.delivery_id = d.id), '[]'::json))
               ORDER BY d.position, d.id)
             FROM deliveries d WHERE d.run_id = r.id), '[]'::json) AS deliveries
       FROM runs r WHERE r.id = $1 AND r.organization_id = $2`,
    [runId, organizationId],
  );
  return row;
}

/**
 * Puts the run's failed deliveries back in the queue, due now, for a new round of the retry
 * schedule. Returns how many; undefined when the run is not the organization's.
 */
export async function retryFailedDeliveries(
  tx: Queryable,
  organizationId: string,
  runId: string,
  now: Date,
): Promise<number | undefined> {
  const [run] = await tx.query('SELECT id FROM runs WHERE id = $1 AND organization_id = $2 FOR UPDATE', [
    runId,
    organizationId,
  ]);
  if (!run) return undefined;
  const rows = await tx.query(
    `UPDATE deliveries SET status = 'pending', round_attempts = 0, next_attempt_at = $2, updated_at = $2
      WHERE run_id = $1 AND status = 'failed'
      RETURNING id`,
    [runId, now],
  );
  if (rows.length > 0) await refreshRunDeliveryStatus(tx, runId);
  return rows.length;
}

/** What a delivery carries besides the run: the task's name. */
export async function taskNameOfRun(
  db: Queryable,
  runId: string,
): Promise<{ id: string; name: string } | undefined> {
  const [row] = await db.query<{ id: string; name: string }>(
    'SELECT t.id, t.name FROM runs r JOIN tasks t ON t.id = r.task_id WHERE r.id = $1',
    [runId],
  );
  return row;
}

/** The task a notice is about: its id and name. */
export async function taskNameOf(
  db: Queryable,
  taskId: string,
): Promise<{ id: string; name: string } | undefined> {
  const [row] = await db.query<{ id: string; name: string }>('SELECT id, name FROM tasks WHERE id = $1', [
    taskId,
  ]);
  return row;
}
