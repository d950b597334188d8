import type { Queryable } from '../db.ts';

/**
 * The NOTIFY channels, one per kind of background work (and the key cache): a write that makes
 * work for a part notifies its channel, and the part's loop in every process wakes up.
 * `svc_run_cancel` carries the id of a canceled run to the worker executing it.
 */
type NotifyChannel =
  | 'svc_tasks'
  | 'svc_runs'
  | 'svc_deliveries'
  | 'svc_billing'
  | 'svc_principals'
  | 'svc_run_cancel';

/** Wakes the listeners of `channel` in every process, when the current transaction commits. */
export async function notify(db: Queryable, channel: NotifyChannel, payload = ''): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [channel, payload]);
}
