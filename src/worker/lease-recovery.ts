import type { Queryable } from '../db/db.ts';
import { notify } from '../db/sql/notify.ts';
import { lockExpiredLeases, recordRunEndAndQueueDeliveries, requeueRuns } from '../db/sql/run-queue.ts';
import type { Deps } from '../domain/deps.ts';

/**
 * Runs whose worker stopped heartbeating (their lease expired): back to the queue, or failed
 * after SVC_RUN_MAX_ATTEMPTS starts. `heldHere`: the runs of the worker that looks, never
 * taken from it. Run by any worker, in a transaction of its own, once per heartbeat interval.
 */
export async function recoverExpiredLeases(
  deps: Pick<Deps, 'config' | 'metrics' | 'log'>,
  tx: Queryable,
  now: Date,
  heldHere: string[],
): Promise<void> {
  const { config, metrics, log } = deps;
  const expired = await lockExpiredLeases(tx, now, heldHere);
  if (!expired.length) return;
  const retry = expired.filter((r) => r.attempts < config.worker.maxAttempts);
  // In organization order: failing a one-off task's run completes the task, which updates its
  // organization's row (active-task count); schedulers take those rows in the same order.
  const giveUp = expired
    .filter((r) => r.attempts >= config.worker.maxAttempts)
    // Code-point order of the canonical text is PostgreSQL's uuid order (byte order).
    .sort((a, b) =>
      a.organization_id < b.organization_id ? -1 : a.organization_id > b.organization_id ? 1 : 0,
    );
  await requeueRuns(
    tx,
    retry.map((r) => r.id),
  );
  for (const r of giveUp) {
    const failed = await recordRunEndAndQueueDeliveries(tx, r.id, null, {
      status: 'failed',
      output: null,
      error: `The run was started ${r.attempts} times and each time its worker stopped responding before it finished; it is not retried again`,
      completedAt: now,
    });
    if (failed?.delivery_status === 'pending') await notify(tx, 'svc_deliveries');
  }
  // Requeued runs, and places freed by failed ones, are claimable by every worker once this
  // transaction commits (when the notification is sent), not only by this one.
  await notify(tx, 'svc_runs');
  metrics.leasesExpired.inc({ action: 'retried' }, retry.length);
  metrics.leasesExpired.inc({ action: 'failed' }, giveUp.length);
  log.warn(
    { retried: retry.map((r) => r.id), failed: giveUp.map((r) => r.id) },
    'runs with an expired lease recovered (their worker stopped heartbeating)',
  );
}
