import type { Queryable } from '../db/db.ts';
import {
  listTaskNoticeJobs,
  type NoticeJobRow,
  queueTaskNotice,
  type TaskNotice,
} from '../db/sql/task-notices.ts';
import type { Clock } from '../lib/clock.ts';
import type { Deps } from './deps.ts';

/** Notice jobs a task page shows: the newest. */
export const NOTICES_SHOWN = 20;

/**
 * Tells the task's destinations `notice` (one delivery job each, through the delivery queue).
 * Pass the transaction that records why the notice is due, so that it is queued exactly once
 * with that decision (and is gone if that rolls back). Returns the number of jobs queued: 0
 * when the task has no destination.
 */
export async function tellTaskDestinations(
  tx: Queryable,
  clock: Clock,
  taskId: string,
  notice: TaskNotice,
): Promise<number> {
  return queueTaskNotice(tx, taskId, notice, await clock.agreedNow(tx));
}

/** One notice job as the dashboard shows it. */
export interface NoticeJobView {
  kind: NoticeJobRow['kind'];
  /** What the notice says (the pause's reason; the cost limit in dollars). */
  summary: string;
  channel: NoticeJobRow['channel'];
  target: string;
  label: string | null;
  status: NoticeJobRow['status'];
  attempts: number;
  error: string | null;
  queuedAt: Date;
  deliveredAt: Date | null;
}

function summaryOf(row: NoticeJobRow): string {
  const p = row.payload;
  if (row.kind === 'task.paused') return typeof p.reason === 'string' ? p.reason : 'Paused';
  if (row.kind === 'source.disconnected')
    return `Source "${typeof p.sourceName === 'string' ? p.sourceName : '?'}" needs reconnecting`;
  const cents = (v: unknown) => (typeof v === 'number' ? `$${(v / 100).toFixed(2)}` : '?');
  return `Monthly cost limit reached: ${cents(p.costCents)} of ${cents(p.limitCents)}`;
}

/** The task's newest notice jobs (the caller has checked the task is the organization's). */
export async function listTaskNotices(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  taskId: string,
): Promise<NoticeJobView[]> {
  const rows = await listTaskNoticeJobs(deps.db, organizationId, taskId, NOTICES_SHOWN);
  return rows.map((row) => ({
    kind: row.kind,
    summary: summaryOf(row),
    channel: row.channel,
    target: row.target,
    label: row.label,
    status: row.status,
    attempts: row.attempt_log.length,
    error: row.status === 'delivered' ? null : row.last_error,
    queuedAt: row.created_at,
    deliveredAt: row.delivered_at,
  }));
}
