// A client of the API written only against the types openapi-typescript generates from the
// served OpenAPI document (./api.ts, generated next to a copy of this file by
// test/openapi-client.test.ts, which type-checks both with the project's tsc and then runs this
// copy against a running service). Outside that test this file does not type-check: it is
// excluded from the project's tsconfig.
import createClient from 'openapi-fetch';
import type { components, paths } from './api.ts';

export interface FlowResult {
  skill: components['schemas']['Skill'];
  task: components['schemas']['Task'];
  finished: components['schemas']['RunWithDeliveries'];
  taskRuns: components['schemas']['Run'][];
  deleteStatus: number;
  afterDelete: { status: number; code: string | undefined };
}

/**
 * Creates a skill and a task with it, runs the task now, reads the finished run and the task's
 * runs, deletes the task and reads it again: each step through the typed client.
 */
export async function clientFlow(
  baseUrl: string,
  apiKey: string,
  organizationId: string,
  /** Resolves once the run has ended; the flow then reads it through the API. */
  runEnded: (runId: string) => Promise<void>,
): Promise<FlowResult> {
  const client = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${apiKey}` } });

  const skill = await client.POST('/api/svc/skills', {
    body: { organizationId, name: 'Plain words', content: 'Answer in plain words.' },
  });
  if (!skill.data) throw new Error(`createSkill: ${skill.response.status} ${skill.error?.error.message}`);

  const task = await client.POST('/api/svc/tasks', {
    body: {
      organizationId,
      name: 'Morning digest',
      prompt: 'Summarise the day ahead',
      schedule: 'daily',
      scheduleTime: '08:00',
      skillIds: [skill.data.id],
    },
  });
  if (!task.data) throw new Error(`createTask: ${task.response.status} ${task.error?.error.message}`);
  const taskId = task.data.id;

  const run = await client.POST('/api/svc/tasks/{taskId}/run', { params: { path: { taskId } } });
  if (!run.data?.id) throw new Error(`runTask: ${run.response.status} ${run.error?.error.message}`);
  const runId = run.data.id;
  await runEnded(runId);

  const finished = await client.GET('/api/svc/runs/{runId}', { params: { path: { runId } } });
  if (!finished.data) throw new Error(`getRun: ${finished.response.status}`);

  const taskRuns = await client.GET('/api/svc/tasks/{taskId}/runs', {
    params: { path: { taskId }, query: { limit: 10 } },
  });
  if (!taskRuns.data) throw new Error(`listTaskRuns: ${taskRuns.response.status}`);

  const deleted = await client.DELETE('/api/svc/tasks/{taskId}', { params: { path: { taskId } } });
  const afterDelete = await client.GET('/api/svc/tasks/{taskId}', { params: { path: { taskId } } });

  return {
    skill: skill.data,
    task: task.data,
    finished: finished.data,
    taskRuns: taskRuns.data,
    deleteStatus: deleted.response.status,
    afterDelete: { status: afterDelete.response.status, code: afterDelete.error?.error.code },
  };
}
