import {
  findRun,
  listRunsForOrganization,
  listRunsForTask,
  type RunRow,
  taskExistsInOrganization,
} from '../db/sql/runs.ts';
import { errors } from '../lib/errors.ts';
import type { Run } from '../schemas/run.ts';
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
  return run;
}

export async function listRuns(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  limit = DEFAULT_LIST_LIMIT,
): Promise<Run[]> {
  return (await listRunsForOrganization(deps.db, organizationId, limit)).map(runView);
}

/** One run of the organization; another organization's run is not found, like an unknown one. */
export async function getRun(deps: Pick<Deps, 'db'>, organizationId: string, runId: string): Promise<Run> {
  const row = await findRun(deps.db, organizationId, runId);
  if (!row) throw errors.notFound('Run');
  return runView(row);
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
