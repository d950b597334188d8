// The MCP tools on tasks: each calls the same domain function as its REST route, with the
// arguments checked against the same schemas (tool-kit.ts), for the key's organization.
import { Type } from 'typebox';
import { expandTasks } from '../../domain/task-expansion.ts';
import {
  createTask,
  deleteOrganizationTask,
  getTask,
  listOrganizationTasks,
  runTaskNow,
  updateOrganizationTask,
} from '../../domain/tasks.ts';
import { Run } from '../../schemas/run.ts';
import {
  ExpandQuery,
  Task,
  TaskCreateBody,
  TaskIdParams,
  TaskListQuery,
  type TaskUpdateBody as TaskUpdate,
  TaskUpdateBody,
} from '../../schemas/task.ts';
import { argumentsOf, fieldsOf, READ_ONLY, type Tool, type ToolContext } from './tool-kit.ts';

/** What every description of a task's fields may rely on. */
const TASK_FIELDS = [
  'Fields: name; prompt (what the model is asked each run); model (a catalog id or routerModelId from list_models; default: the catalog default);',
  'schedule: once | hourly | daily | weekly, with scheduleTime "HH:MM" (24-hour, in timezone), scheduleDays (weekly: monday..sunday),',
  'timezone (IANA name such as "Europe/Berlin"; default UTC) or cronExpression (5 fields, in timezone);',
  'destinations [{type: email|sms|webhook, value, label?}] get each finished run; skillIds, sourceIds (from list_skills, list_sources);',
  'monthlyCostLimitCents and maxCostCentsPerRun are in cents (USD); deliverOn: always | change | failure; autoPauseAfterFailures 0-100.',
  'Times in answers (nextRunAt, lastRunAt, createdAt) are ISO 8601 in UTC.',
].join(' ');

const org = (ctx: ToolContext) => ctx.principal.organizationId;
const taskId = (args: Record<string, unknown>) => args.taskId as string;

/** A status change as the REST API's PATCH /tasks/{taskId} makes it. */
function statusTool(name: string, title: string, status: 'active' | 'paused', description: string): Tool {
  return {
    name,
    title,
    description,
    input: argumentsOf(fieldsOf(TaskIdParams)),
    output: Task,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    run: (ctx, args) => updateOrganizationTask(ctx.deps, org(ctx), taskId(args), { status }),
  };
}

export const taskTools: Tool[] = [
  {
    name: 'list_tasks',
    title: 'List tasks',
    description:
      'Lists the organization\'s scheduled AI tasks, newest first: each with its schedule, status (active, paused, completed), nextRunAt and lastRunAt (ISO 8601 UTC). Use it to find a task\'s id. expand: "skills", "sources" or "skills,sources" includes the attached skills and sources in full.',
    input: argumentsOf(fieldsOf(TaskListQuery)),
    output: Type.Array(Task),
    annotations: READ_ONLY,
    run: async (ctx, args) =>
      expandTasks(ctx.deps, org(ctx), await listOrganizationTasks(ctx.deps, org(ctx)), args.expand as string),
  },
  {
    name: 'get_task',
    title: 'Get a task',
    description:
      'One task by its id (a UUID from list_tasks or create_task), with all its fields. expand as in list_tasks.',
    input: argumentsOf(fieldsOf(TaskIdParams), fieldsOf(ExpandQuery)),
    output: Task,
    annotations: READ_ONLY,
    run: async (ctx, args) => {
      const task = await getTask(ctx.deps, org(ctx), taskId(args));
      return (await expandTasks(ctx.deps, org(ctx), [task], args.expand as string))[0];
    },
  },
  {
    name: 'create_task',
    title: 'Create a task',
    description: `Creates a scheduled AI task that runs a prompt on a model on its schedule and sends each result to its destinations. Use preview_schedule first to check when it would run. Only name and prompt are required; the schedule defaults to once. ${TASK_FIELDS} Answers with the new task (its id, nextRunAt).`,
    input: argumentsOf(fieldsOf(TaskCreateBody)),
    output: Task,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    run: (ctx, args) =>
      createTask(ctx.deps, org(ctx), {
        ...(args as Omit<TaskCreateBody, 'organizationId'>),
        organizationId: org(ctx),
      }),
  },
  {
    name: 'update_task',
    title: 'Update a task',
    description: `Changes some fields of a task (taskId); fields not given keep their value, null clears an optional one (scheduleTime, scheduleDays, cronExpression, monthlyCostLimitCents, ...); skillIds, sourceIds and destinations replace the whole list. status: active | paused | completed. ${TASK_FIELDS} Answers with the task as saved.`,
    input: argumentsOf(fieldsOf(TaskIdParams), fieldsOf(TaskUpdateBody)),
    output: Task,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    run: (ctx, args) => {
      const { taskId: id, ...patch } = args;
      return updateOrganizationTask(ctx.deps, org(ctx), id as string, patch as TaskUpdate);
    },
  },
  {
    name: 'delete_task',
    title: 'Delete a task',
    description:
      'Deletes a task with all its runs, for good (usage already counted stays counted). Prefer pause_task to stop a task that may be wanted again.',
    input: argumentsOf(fieldsOf(TaskIdParams)),
    output: Type.Object({ ok: Type.Boolean() }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    run: async (ctx, args) => {
      await deleteOrganizationTask(ctx.deps, org(ctx), taskId(args));
      return { ok: true };
    },
  },
  statusTool(
    'pause_task',
    'Pause a task',
    'paused',
    'Pauses a task: its schedule creates no runs until resume_task. Runs already pending or running go on (cancel_run stops one). Answers with the task.',
  ),
  statusTool(
    'resume_task',
    'Resume a task',
    'active',
    'Resumes a paused task (status active): its schedule runs again from the next slot (nextRunAt, ISO 8601 UTC); slots passed while paused are not made up. Answers with the task.',
  ),
  {
    name: 'run_task_now',
    title: 'Run a task now',
    description:
      "Starts a run of the task at once, outside its schedule, and answers with the pending run (its id). The run executes in the background: poll get_run with that id until status is completed or failed, then read output (or error). Refused (conflict) while a run of the task is pending or running, or when its monthly cost limit is reached; plan_limit_exceeded when the plan's runs are used up.",
    input: argumentsOf(fieldsOf(TaskIdParams)),
    output: Run,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    run: (ctx, args) => runTaskNow(ctx.deps, org(ctx), taskId(args)),
  },
];
