// Cancel and replay: stopping a run from outside, and running a task again as an earlier run
// ran it (the same time context), with the task as it is now and, if asked, another model.
import { notify } from '../db/sql/notify.ts';
import { cancelRunRow } from '../db/sql/run-cancel.ts';
import { findRun } from '../db/sql/runs.ts';
import { errors } from '../lib/errors.ts';
import type { ReplayBody, Run } from '../schemas/run.ts';
import type { Deps } from './deps.ts';
import { runView } from './runs.ts';
import { getTask, runTaskNow } from './tasks.ts';

/** The error of a run ended by a cancel request (every cancel's error starts with "Canceled"). */
export const CANCELED_BY_REQUEST = 'Canceled by request';

/**
 * Cancels one of the organization's runs. A pending or running run ends at once, `failed` with
 * `canceledAt`, the usage recorded so far, and no delivery; the worker executing a running run
 * is told on commit (NOTIFY svc_run_cancel) and stops it, and the place it held under
 * SVC_ORG_CONCURRENCY is free at once (NOTIFY svc_runs). A run that has already ended (a
 * second cancel included) answers 409; another organization's run is not found.
 */
export async function cancelRun(
  deps: Pick<Deps, 'db' | 'clock' | 'log'>,
  organizationId: string,
  runId: string,
): Promise<Run> {
  const canceled = await deps.db.transaction(async (tx) => {
    const row = await cancelRunRow(tx, organizationId, runId, CANCELED_BY_REQUEST, deps.clock.statementNow());
    if (row?.started_at) {
      await notify(tx, 'svc_run_cancel', row.id);
      await notify(tx, 'svc_runs');
    }
    return row;
  });
  if (canceled) {
    deps.log.info({ runId, organizationId, wasRunning: canceled.started_at !== null }, 'run canceled');
    return runView(canceled);
  }
  const run = await findRun(deps.db, organizationId, runId);
  if (!run) throw errors.notFound('Run');
  throw errors.conflict(
    `The run has already ended (${run.status}${run.canceled_at ? ', canceled' : ''}); only a pending or running run can be canceled`,
  );
}

/**
 * Replays one of the organization's runs: a new pending run of the same task, created like a
 * run now (the plan's run limit, one run of a task at a time, workers woken), executed with the
 * task's current prompt, skills and sources, the original's time context (its slot, or when it
 * was created if it was started on demand) and the task's model or `body.model`.
 */
export async function replayRun(
  deps: Deps,
  organizationId: string,
  runId: string,
  body: ReplayBody = {},
): Promise<Run> {
  const original = await findRun(deps.db, organizationId, runId);
  if (!original) throw errors.notFound('Run');
  if (body.model !== undefined && !deps.models.find(body.model)) {
    const message = `"${body.model}" is not a model of the catalog (GET /api/svc/models)`;
    throw errors.validation(`/body/model ${message}`, [{ path: '/body/model', message }]);
  }
  // The replay names its model, as given or the task's at this moment, so that what it was
  // run with stays known when the task's model changes later.
  const model = body.model ?? (await getTask(deps, organizationId, original.task_id)).model;
  return runTaskNow(deps, organizationId, original.task_id, {
    // A replay of a replay replays the same original moment.
    replayOf: original.id,
    contextAt: original.replay_context_at ?? original.slot_at ?? original.created_at,
    slotAt: original.trigger === 'replay' ? original.replay_slot_at : original.slot_at,
    model,
  });
}
