// The MCP tools on runs, schedules, the catalog, skills, sources, usage and billing: each calls
// the same domain function as its REST route, for the key's organization.
import { Type } from 'typebox';
import { billingStatus } from '../../domain/billing.ts';
import { modelView } from '../../domain/models.ts';
import { cancelRun } from '../../domain/run-control.ts';
import { getRun, listRuns, listTaskRuns } from '../../domain/runs.ts';
import { listSkills } from '../../domain/skills.ts';
import { previewSchedule } from '../../domain/slot-records.ts';
import { listSources } from '../../domain/sources.ts';
import { organizationStatistics } from '../../domain/stats.ts';
import { BillingStatus } from '../../schemas/billing.ts';
import { Model } from '../../schemas/model.ts';
import { Run, RunIdParams, RunWithDeliveries, TaskRunsParams, TaskRunsQuery } from '../../schemas/run.ts';
import { Skill } from '../../schemas/skill.ts';
import { SchedulePreviewBody, UpcomingSlot } from '../../schemas/slot.ts';
import { Source } from '../../schemas/source.ts';
import { Stats } from '../../schemas/stats.ts';
import { argumentsOf, fieldsOf, READ_ONLY, type Tool, type ToolContext } from './tool-kit.ts';

const org = (ctx: ToolContext) => ctx.principal.organizationId;
const runId = (args: Record<string, unknown>) => args.runId as string;

const RUN_FIELDS =
  "A run has status pending | running | completed | failed, output (the model's answer) or error, costCents (cents, USD), tokensUsed, durationMs (milliseconds), createdAt/startedAt/completedAt (ISO 8601 UTC) and trigger (schedule, manual, replay).";

export const otherTools: Tool[] = [
  {
    name: 'list_runs',
    title: 'List runs',
    description: `The organization's runs, newest first; with taskId, only that task's. limit: 1-100 (default 20). ${RUN_FIELDS}`,
    input: argumentsOf({ taskId: Type.Optional(TaskRunsParams.properties.taskId) }, fieldsOf(TaskRunsQuery)),
    output: Type.Array(Run),
    annotations: READ_ONLY,
    run: (ctx, args) => {
      const limit = args.limit as number | undefined;
      return typeof args.taskId === 'string'
        ? listTaskRuns(ctx.deps, org(ctx), args.taskId, limit)
        : listRuns(ctx.deps, org(ctx), limit);
    },
  },
  {
    name: 'get_run',
    title: 'Get a run',
    description: `One run by its id, with its deliveries (where its result was sent, each attempt). Use it to wait for a run started by run_task_now: call again until status is completed or failed. ${RUN_FIELDS}`,
    input: argumentsOf(fieldsOf(RunIdParams)),
    output: RunWithDeliveries,
    annotations: READ_ONLY,
    run: (ctx, args) => getRun(ctx.deps, org(ctx), runId(args)),
  },
  {
    name: 'cancel_run',
    title: 'Cancel a run',
    description:
      'Cancels a pending or running run: it ends at once as failed, its error "Canceled by request", and its execution stops. A run that has already finished is a conflict. Answers with the run.',
    input: argumentsOf(fieldsOf(RunIdParams)),
    output: Run,
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    run: (ctx, args) => cancelRun(ctx.deps, org(ctx), runId(args)),
  },
  {
    name: 'preview_schedule',
    title: 'Preview a schedule',
    description:
      'The first slots (instants) a task with these schedule fields would run at, without creating anything: each in UTC (ISO 8601) and in the timezone, with notes where a daylight-saving change moved one. Fields as in create_task: schedule (once | hourly | daily | weekly), scheduleTime "HH:MM", scheduleDays (monday..sunday), timezone (IANA name, default UTC) or cronExpression (5 fields); count: how many slots.',
    input: argumentsOf(fieldsOf(SchedulePreviewBody)),
    output: Type.Array(UpcomingSlot),
    annotations: READ_ONLY,
    run: async (ctx, args) =>
      previewSchedule(ctx.deps, {
        ...(args as Omit<SchedulePreviewBody, 'organizationId'>),
        organizationId: org(ctx),
      }),
  },
  {
    name: 'list_models',
    title: 'List models',
    description:
      "The AI models a task can use (a task's model field takes an id or routerModelId from here), with their provider, context length (tokens), output speed (tokens per second), power tier (1 is the most powerful), benchmark indexes and whether they support tool calling and internet search.",
    input: argumentsOf(),
    output: Type.Array(Model),
    annotations: READ_ONLY,
    run: async (ctx) => ctx.deps.models.list().map(modelView),
  },
  {
    name: 'list_skills',
    title: 'List skills',
    description:
      "The organization's skills: reusable instructions sent to the model before a task's prompt. Attach one to a task with its id in skillIds.",
    input: argumentsOf(),
    output: Type.Array(Skill),
    annotations: READ_ONLY,
    run: (ctx) => listSkills(ctx.deps, org(ctx)),
  },
  {
    name: 'list_sources',
    title: 'List sources',
    description:
      "The organization's sources: tool providers (MCP servers, APIs, built-in tools) a task's runs may call. Attach one to a task with its id in sourceIds. Secrets are masked.",
    input: argumentsOf(),
    output: Type.Array(Source),
    annotations: READ_ONLY,
    run: (ctx) => listSources(ctx.deps, org(ctx)),
  },
  {
    name: 'get_usage',
    title: 'Usage statistics',
    description:
      "The organization's usage statistics since it began: active and total tasks, runs created (deleted ones included), completed and failed runs, total cost in cents (USD) and total tokens.",
    input: argumentsOf(),
    output: Stats,
    annotations: READ_ONLY,
    run: (ctx) => organizationStatistics(ctx.deps, org(ctx)),
  },
  {
    name: 'get_billing_status',
    title: 'Billing status',
    description:
      "The organization's plan (free or paid), its limits and use in the current billing period: runsLimit (null: unlimited) and runsUsed, tasksLimit and tasksCount (active tasks), usersLimit and usersCount, usageCostCents and usageCreditsCents (cents, USD), billingPeriodStart (ISO 8601 UTC). Use it before creating tasks or runs to see what is left.",
    input: argumentsOf(),
    output: BillingStatus,
    annotations: READ_ONLY,
    run: (ctx) => billingStatus(ctx.deps, org(ctx)),
  },
];
