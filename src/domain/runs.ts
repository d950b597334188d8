import { findRunWithDeliveries, type RunDeliveryRow, retryFailedDeliveries } from '../db/sql/deliveries.ts';
import { notify } from '../db/sql/notify.ts';
import {
  listRunsForOrganization,
  listRunsForTask,
  type RunRow,
  taskExistsInOrganization,
} from '../db/sql/runs.ts';
import { errors } from '../lib/errors.ts';
import type { Delivery, Run, RunWithDeliveries } from '../schemas/run.ts';
import type { Deps } from './deps.ts';

export const DEFAULT_LIST_LIMIT = 20;

/** The Run resource of a row; fields without a value are omitted. */
export function runView(row: RunRow): Run {
  const run: Run = {
    id: row.id,
    taskId: row.task_id,
    status: row.status,
    costCents: Number(row.cost_cents),
    tokensUsed: row.tokens_used,
    createdAt: row.created_at.toISOString(),
  };
  if (row.delivery_status !== null) run.deliveryStatus = row.delivery_status;
  if (row.output !== null) run.output = row.output;
  if (row.error !== null) run.error = row.error;
  if (row.duration_ms !== null) run.durationMs = row.duration_ms;
  if (row.started_at) run.startedAt = row.started_at.toISOString();
  if (row.completed_at) run.completedAt = row.completed_at.toISOString();
  run.trigger = row.trigger;
  const slot = row.slot_at ?? row.replay_slot_at;
  if (slot) run.scheduledFor = slot.toISOString();
  if (row.canceled_at) run.canceledAt = row.canceled_at.toISOString();
  if (row.replay_of) run.replayOf = row.replay_of;
  if (row.model !== null) run.model = row.model;
  return run;
}

export async function listRuns(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  limit = DEFAULT_LIST_LIMIT,
): Promise<Run[]> {
  return (await listRunsForOrganization(deps.db, organizationId, limit)).map(runView);
}

function deliveryView(row: RunDeliveryRow): Delivery {
  const delivery: Delivery = {
    id: row.id,
    type: row.channel,
    value: row.target,
    // `sending` is an attempt in progress: still pending for the API's deliveryStatus.
    status: row.status,
    attempts: row.attempt_log.map((a) => ({
      attempt: a.attempt,
      at: new Date(a.started_at).toISOString(),
      durationMs: a.duration_ms,
      outcome: a.outcome,
      ...(a.status_code !== null && { statusCode: a.status_code }),
      ...(a.error !== null && { error: a.error }),
      ...(a.response !== null && { response: a.response }),
    })),
  };
  if (row.destination_id) delivery.destinationId = row.destination_id;
  if (row.label !== null) delivery.label = row.label;
  if (row.status === 'pending' && row.next_attempt_at)
    delivery.nextAttemptAt = new Date(row.next_attempt_at).toISOString();
  if (row.delivered_at) delivery.deliveredAt = new Date(row.delivered_at).toISOString();
  if (row.last_error !== null && row.status !== 'delivered') delivery.error = row.last_error;
  return delivery;
}

/**
 * One run of the organization with its deliveries; another organization's run is not found,
 * like an unknown one.
 */
export async function getRun(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  runId: string,
): Promise<RunWithDeliveries> {
  const row = await findRunWithDeliveries(deps.db, organizationId, runId);
  if (!row) throw errors.notFound('Run');
  const { deliveries } = row;
  return { ...runView(row), ...(deliveries.length > 0 && { deliveries: deliveries.map(deliveryView) }) };
}

/**
 * Retries the run's failed deliveries: each goes back in the queue, due now, with a new round
 * of the retry schedule (its attempt log is kept). 409 when none has failed.
 */
export async function redeliverRun(
  deps: Pick<Deps, 'db' | 'clock'>,
  organizationId: string,
  runId: string,
): Promise<RunWithDeliveries> {
  const count = await deps.db.transaction(async (tx) => {
    const now = await deps.clock.agreedNow(tx);
    const n = await retryFailedDeliveries(tx, organizationId, runId, now);
    if (n) await notify(tx, 'svc_deliveries');
    return n;
  });
  if (count === undefined) throw errors.notFound('Run');
  if (count === 0) throw errors.conflict('The run has no failed delivery to retry');
  return getRun(deps, organizationId, runId);
}

/** A task's runs, newest first; the task must be the organization's. */
export async function listTaskRuns(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  taskId: string,
  limit = DEFAULT_LIST_LIMIT,
): Promise<Run[]> {
  if (!(await taskExistsInOrganization(deps.db, organizationId, taskId))) throw errors.notFound('Task');
  return (await listRunsForTask(deps.db, organizationId, taskId, limit)).map(runView);
}
