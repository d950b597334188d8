import type { Queryable } from '../db/db.ts';
import { taskRunState } from '../db/sql/cost-limit.ts';
import { notify } from '../db/sql/notify.ts';
import { insertRunIfUnrestricted } from '../db/sql/run-now.ts';
import { insertRun, type ReplayFields, type RunRow } from '../db/sql/runs.ts';
import { type ForeignLink, foreignLinks, lockTasksLimit } from '../db/sql/task-create.ts';
import {
  clearAutoPause,
  deleteTask,
  findTask,
  listTasks,
  lockTask,
  lockTaskRunsInFlight,
  replaceTaskDestinations,
  replaceTaskSkills,
  replaceTaskSources,
  setLastDeliveredRun,
  TASK_SETTING_DEFAULTS,
  type TaskFields,
  type TaskWithLinks,
  updateTask,
} from '../db/sql/tasks.ts';
import { emailAddressProblem } from '../lib/email-address.ts';
import { AppError, type ErrorDetail, errors } from '../lib/errors.ts';
import { memoOnFrozen } from '../lib/frozen.ts';
import { newId } from '../lib/ids.ts';
import {
  checkCronExpression,
  firstSlot,
  isValidTimezone,
  type Weekday,
  weekdayAt,
} from '../schedule/slots.ts';
import { scheduleSpecOf } from '../schedule/task-spec.ts';
import { slotNeedsWake } from '../schedule/wake.ts';
import type { Task, TaskCreateBody, TaskUpdateBody } from '../schemas/task.ts';
import { refuseOverCostLimit } from './cost-limit.ts';
import type { Deps } from './deps.ts';
import { checkDestination } from './destinations.ts';
import { checkTaskTotals, orgCapReached, utf8Bytes } from './org-caps.ts';
import { PLAN_TASKS_LIMITS, type Plan } from './plans.ts';
import { assertIfMatch, deleteIfMatch } from './preconditions.ts';
import { patchedRunCheckColumns, runCheckColumnsOf, runCheckProblems, runCheckView } from './run-checks.ts';
import {
  LIMITED_PLANS,
  lockRunAllowances,
  type RunAllowance,
  recordRunLimitReached,
  runLimitMessage,
} from './run-limit.ts';
import { runView } from './runs.ts';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * A task's representation. A row the database seam reused (frozen: db.ts, REUSE_ROWS) gets the
 * same frozen view each time: a task polled unchanged is not rebuilt at each read.
 */
export const taskView: (row: Readonly<TaskWithLinks>) => Task = memoOnFrozen(buildTaskView, true);

function buildTaskView(row: Readonly<TaskWithLinks>): Task {
  const task: Task = {
    id: row.id,
    organizationId: row.organization_id,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    name: row.name,
    prompt: row.prompt,
    model: row.model,
    schedule: row.schedule,
    status: row.status,
    timezone: row.timezone,
    nextRunAt: iso(row.next_run_at),
    lastRunAt: iso(row.latest_run_at ?? row.last_run_at),
    skillIds: row.skill_ids,
    sourceIds: row.source_ids,
    destinations: row.destinations.map((d) => ({
      id: d.id,
      type: d.type,
      value: d.value,
      ...(d.label !== null && { label: d.label }),
    })),
  };
  if (row.cron_expression !== null) task.cronExpression = row.cron_expression;
  if (row.schedule_time !== null) task.scheduleTime = row.schedule_time;
  if (row.schedule_days !== null) task.scheduleDays = row.schedule_days as Weekday[];
  if (row.delivery_email !== null) task.deliveryEmail = row.delivery_email;
  if (row.delivery_email_address !== null) task.deliveryEmailAddress = row.delivery_email_address;
  if (row.delivery_sms !== null) task.deliverySms = row.delivery_sms;
  if (row.delivery_phone_number !== null) task.deliveryPhoneNumber = row.delivery_phone_number;
  if (row.user_id !== null) task.userId = row.user_id;
  Object.assign(task, runCheckView(row));
  task.autoPauseAfterFailures = row.auto_pause_after_failures;
  task.deliverOn = row.deliver_on;
  task.consecutiveFailures = row.consecutive_failures;
  if (row.paused_reason !== null) task.pausedReason = row.paused_reason;
  if (row.monthly_cost_limit_cents !== null) task.monthlyCostLimitCents = row.monthly_cost_limit_cents;
  return task;
}

/** A weekly task without days runs on the weekday it was set up, in its timezone: stored, so it stays put. */
export function pinnedWeekday(
  f: Pick<TaskFields, 'schedule' | 'cron_expression' | 'schedule_days' | 'timezone'>,
  now: Date,
): string[] | null {
  if (f.schedule === 'weekly' && !f.cron_expression && !f.schedule_days?.length) {
    return [weekdayAt(now, f.timezone)];
  }
  return f.schedule_days;
}

function pinWeekday(f: TaskFields, now: Date): void {
  f.schedule_days = pinnedWeekday(f, now);
}

/** The schedule rules the schema cannot express (a task's, and a schedule preview's). */
export function scheduleProblems(f: Pick<TaskFields, 'timezone' | 'cron_expression'>): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  if (!isValidTimezone(f.timezone))
    details.push({ path: '/body/timezone', message: 'is not an IANA timezone name' });
  if (f.cron_expression !== null) {
    const cron = checkCronExpression(f.cron_expression);
    if (!cron.ok) details.push({ path: '/body/cronExpression', message: cron.message });
  }
  return details;
}

/** Rules the schema cannot express; every problem is reported, each with its field. */
function checkRules(
  deps: Pick<Deps, 'models'>,
  f: TaskFields,
  destinations: TaskCreateBody['destinations'],
  modelGiven: boolean,
  emailGiven = true,
  /** Problems found before (the run checks, which take a compile). */
  found: ErrorDetail[] = [],
): void {
  const details: ErrorDetail[] = [...found];
  // Like a destination's, by the rule delivery applies; a stored address is checked only when
  // the request sets it, so a PATCH of another field never fails on an older value.
  const emailProblem =
    emailGiven && f.delivery_email_address !== null
      ? emailAddressProblem(f.delivery_email_address)
      : undefined;
  if (emailProblem) details.push({ path: '/body/deliveryEmailAddress', message: emailProblem });
  details.push(...scheduleProblems(f));
  // Only a model the request names is checked: a PATCH of another field must not fail because
  // the operator's catalog has since dropped the task's stored model (its runs then fail with a
  // message saying so).
  if (modelGiven && !deps.models.find(f.model)) {
    details.push({
      path: '/body/model',
      message: `"${f.model}" is not a model of the catalog (GET /api/svc/models)`,
    });
  }
  if (f.delivery_email && !f.delivery_email_address) {
    details.push({ path: '/body/deliveryEmailAddress', message: 'is required when deliveryEmail is true' });
  }
  if (f.delivery_sms && !f.delivery_phone_number) {
    details.push({ path: '/body/deliveryPhoneNumber', message: 'is required when deliverySms is true' });
  }
  for (const [i, d] of (destinations ?? []).entries()) {
    const problem = checkDestination(d.type, d.value);
    if (problem) details.push({ path: `/body/destinations/${i}/value`, message: problem });
  }
  if (details.length) throw errors.validation(`${details[0]?.path} ${details[0]?.message}`, details);
}

/** The 400 for skills or sources that are not the organization's, one detail per id. */
function foreignIdsError(
  body: { skillIds?: string[]; sourceIds?: string[] },
  foreign: ForeignLink[],
): AppError {
  const details: ErrorDetail[] = [...foreign]
    .sort((a, b) => a.field.localeCompare(b.field) || a.index - b.index)
    .map(({ field, index }) => ({
      path: `/body/${field}/${index}`,
      message: `no ${field === 'skillIds' ? 'skill' : 'source'} ${body[field]?.[index]} in this organization`,
    }));
  return errors.validation(`${details[0]?.path}: ${details[0]?.message}`, details);
}

// The rules themselves (whose skills and sources, how many active tasks) are the SQL's
// (db/sql/task-create.ts), one text for a create and for a change; here they become errors.

/** A change's skills and sources must be the organization's. */
async function checkOwnership(
  db: Queryable,
  organizationId: string,
  body: { skillIds?: string[]; sourceIds?: string[] },
) {
  if (!body.skillIds?.length && !body.sourceIds?.length) return;
  const foreign = await foreignLinks(db, organizationId, body);
  if (foreign.length) throw foreignIdsError(body, foreign);
}

const tasksLimitReached = ({ plan, tasksLimit }: { plan: Plan; tasksLimit: number }) =>
  errors.planLimit(
    `The ${plan} plan allows ${tasksLimit} active tasks; pause or delete one, or upgrade the plan`,
  );

/** Resuming a task makes one more active task: locks the organization's row and checks the limit. */
async function checkTasksLimit(tx: Queryable, organizationId: string): Promise<void> {
  const limit = await lockTasksLimit(tx, organizationId, 1, PLAN_TASKS_LIMITS);
  if (!limit) throw errors.notFound('Organization');
  if (limit.refused) throw tasksLimitReached(limit);
}

const destinationRows = (list: TaskCreateBody['destinations']) =>
  (list ?? []).map((d) => ({ id: newId(), type: d.type, value: d.value, label: d.label ?? null }));

export async function createTask(deps: Deps, organizationId: string, body: TaskCreateBody): Promise<Task> {
  const now = deps.clock.now();
  const fields: TaskFields = {
    name: body.name,
    prompt: body.prompt,
    model: body.model ?? deps.models.defaultModel.routerModelId,
    schedule: body.schedule ?? 'once',
    status: 'active',
    cron_expression: body.cronExpression ?? null,
    schedule_time: body.scheduleTime ?? null,
    schedule_days: body.scheduleDays ?? null,
    timezone: body.timezone ?? 'UTC',
    delivery_email: body.deliveryEmail ?? null,
    delivery_email_address: body.deliveryEmailAddress ?? null,
    delivery_sms: body.deliverySms ?? null,
    delivery_phone_number: body.deliveryPhoneNumber ?? null,
    user_id: null,
    next_run_at: null,
    updated_at: now,
    ...runCheckColumnsOf(body),
    auto_pause_after_failures: body.autoPauseAfterFailures ?? TASK_SETTING_DEFAULTS.auto_pause_after_failures,
    deliver_on: body.deliverOn ?? TASK_SETTING_DEFAULTS.deliver_on,
    monthly_cost_limit_cents: body.monthlyCostLimitCents ?? null,
  };
  checkRules(deps, fields, body.destinations, true, true, await runCheckProblems(organizationId, body));
  pinWeekday(fields, now);
  fields.next_run_at = firstSlot(scheduleSpecOf(fields), now);
  const created = await deps.taskCreates.create({
    row: { id: newId(), organizationId, createdAt: now, ...fields },
    links: {
      skillIds: body.skillIds ?? [],
      sourceIds: body.sourceIds ?? [],
      destinations: destinationRows(body.destinations),
    },
    wakeSchedulers: slotNeedsWake(fields.next_run_at, now),
  });
  if (created.ok) return taskView(created.task);
  switch (created.errorType) {
    case 'no_organization':
      throw errors.notFound('Organization');
    case 'foreign_ids':
      throw foreignIdsError(body, created.foreign);
    case 'tasks_limit':
      throw tasksLimitReached(created);
    case 'org_cap':
      throw orgCapReached(created.cap, deps.config.orgCaps);
  }
}

export async function getTask(deps: Pick<Deps, 'db'>, organizationId: string, id: string): Promise<Task> {
  const row = await findTask(deps.db, organizationId, id);
  if (!row) throw errors.notFound('Task');
  return taskView(row);
}

export async function listOrganizationTasks(deps: Pick<Deps, 'db'>, organizationId: string): Promise<Task[]> {
  return (await listTasks(deps.db, organizationId)).map(taskView);
}

const SCHEDULE_FIELDS = [
  'schedule',
  'schedule_time',
  'schedule_days',
  'cron_expression',
  'timezone',
] as const;

/**
 * Applies a PATCH to one of the organization's tasks under its row lock: the limits and caps a
 * change can pass, a new schedule's `nextRunAt`, and a wake-up of the scheduler when the task
 * becomes due sooner. 404 for another organization's task.
 */
export async function updateOrganizationTask(
  deps: Deps,
  organizationId: string,
  id: string,
  patch: TaskUpdateBody,
  ifMatch?: string,
): Promise<Task> {
  const now = deps.clock.now();
  // Compiled before the task's row is locked: a compile may take a while.
  const checkProblems = await runCheckProblems(organizationId, patch);
  await deps.db.transaction(async (tx) => {
    if (!(await lockTask(tx, organizationId, id))) throw errors.notFound('Task');
    const current = await findTask(tx, organizationId, id);
    if (!current) throw errors.notFound('Task');
    assertIfMatch(ifMatch, taskView(current));
    const next: TaskFields = {
      name: patch.name ?? current.name,
      prompt: patch.prompt ?? current.prompt,
      model: patch.model ?? current.model,
      schedule: patch.schedule ?? current.schedule,
      status: patch.status ?? current.status,
      cron_expression: patch.cronExpression !== undefined ? patch.cronExpression : current.cron_expression,
      schedule_time: patch.scheduleTime !== undefined ? patch.scheduleTime : current.schedule_time,
      schedule_days: patch.scheduleDays !== undefined ? patch.scheduleDays : current.schedule_days,
      timezone: patch.timezone ?? current.timezone,
      delivery_email: patch.deliveryEmail ?? current.delivery_email,
      delivery_email_address:
        patch.deliveryEmailAddress !== undefined
          ? patch.deliveryEmailAddress
          : current.delivery_email_address,
      delivery_sms: patch.deliverySms ?? current.delivery_sms,
      delivery_phone_number:
        patch.deliveryPhoneNumber !== undefined ? patch.deliveryPhoneNumber : current.delivery_phone_number,
      user_id: current.user_id,
      next_run_at: current.next_run_at,
      updated_at: now,
      ...patchedRunCheckColumns(patch, current),
      auto_pause_after_failures: patch.autoPauseAfterFailures ?? current.auto_pause_after_failures,
      deliver_on: patch.deliverOn ?? current.deliver_on,
      monthly_cost_limit_cents:
        patch.monthlyCostLimitCents !== undefined
          ? patch.monthlyCostLimitCents
          : current.monthly_cost_limit_cents,
    };
    checkRules(
      deps,
      next,
      patch.destinations,
      patch.model !== undefined,
      patch.deliveryEmailAddress !== undefined,
      checkProblems,
    );
    pinWeekday(next, now);
    if (patch.prompt !== undefined || patch.destinations !== undefined) {
      await checkTaskTotals(tx, organizationId, deps.config.orgCaps, {
        promptBytes: utf8Bytes(next.prompt) - utf8Bytes(current.prompt),
        destinations:
          (patch.destinations?.length ?? current.destinations.length) - current.destinations.length,
      });
    }

    // nextRunAt: only active tasks have one. Resuming, or changing when the task runs,
    // computes it afresh from now (paused time is not caught up).
    const resumed = next.status === 'active' && current.status !== 'active';
    const rescheduled = SCHEDULE_FIELDS.some((k) => JSON.stringify(next[k]) !== JSON.stringify(current[k]));
    if (next.status !== 'active') next.next_run_at = null;
    else if (resumed || rescheduled) next.next_run_at = firstSlot(scheduleSpecOf(next), now);
    if (resumed) await checkTasksLimit(tx, organizationId);

    await checkOwnership(tx, organizationId, patch);
    await updateTask(tx, organizationId, id, next);
    if (resumed) await clearAutoPause(tx, id);
    if (next.deliver_on === 'change' && current.deliver_on !== 'change') await setLastDeliveredRun(tx, id);
    if (patch.skillIds) await replaceTaskSkills(tx, id, patch.skillIds);
    if (patch.sourceIds) await replaceTaskSources(tx, id, patch.sourceIds);
    if (patch.destinations) await replaceTaskDestinations(tx, id, destinationRows(patch.destinations), now);
    if (
      next.next_run_at?.getTime() !== current.next_run_at?.getTime() &&
      slotNeedsWake(next.next_run_at, now)
    ) {
      await notify(tx, 'svc_tasks');
    }
  });
  return getTask(deps, organizationId, id);
}

/** Deletes one of the organization's tasks with its runs (its usage stays on the ledger). */
export async function deleteOrganizationTask(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  id: string,
  ifMatch?: string,
): Promise<void> {
  const deleted = await deleteIfMatch(deps.db, ifMatch, {
    locked: async (tx) => {
      // Its runs in flight before the task's row, as the delete takes them (lockTaskRunsInFlight).
      await lockTaskRunsInFlight(tx, organizationId, id);
      return (
        ((await lockTask(tx, organizationId, id)) && (await findTask(tx, organizationId, id))) || undefined
      );
    },
    view: taskView,
    remove: (tx) => deleteTask(tx, organizationId, id),
  });
  if (!deleted) throw errors.notFound('Task');
  // A running run deleted with its task frees its organization's place under the concurrency
  // limit now (its worker learns it at its next heartbeat): the workers look again, after the
  // delete has committed.
  if (deleted.hadRunning) await notify(deps.db, 'svc_runs');
}

/**
 * An on-demand run: a pending run that the worker executes like a scheduled one. One at a time
 * per task: while a run of the task is pending or running, another answers 409. A replay
 * (domain/run-control.ts) is created here too, `replay` saying what it replays.
 */
export async function runTaskNow(deps: Deps, organizationId: string, id: string, replay?: ReplayFields) {
  const now = deps.clock.now();
  const newRun = {
    id: newId(),
    organizationId,
    taskId: id,
    slotAt: null,
    trigger: replay ? ('replay' as const) : ('manual' as const),
    now,
    ...(replay && { replay }),
  };
  // Most runs now have nothing that could refuse them: created in one round trip. Otherwise (or
  // when the task is not found) the transaction below decides, and says why.
  // And when this process's worker has a free place, the run is created claimed by it.
  const place = deps.runHandoff.reserve();
  let unrestricted: Awaited<ReturnType<typeof insertRunIfUnrestricted>>;
  try {
    unrestricted = await insertRunIfUnrestricted(deps.db, newRun, LIMITED_PLANS, place?.claim);
  } catch (err) {
    place?.release();
    throw err;
  }
  if (unrestricted?.claimed && place) place.begin(unrestricted.claimed);
  else place?.release();
  if (unrestricted) {
    if (!unrestricted.claimed) deps.signals.emit('svc_runs', unrestricted.run.id);
    // The run as created (pending), as the answer of run now always is.
    return runView(unrestricted.run);
  }
  type Outcome = { run: RunRow } | { refused: RunAllowance; told: boolean } | { overCost: string };
  const created = await deps.db.transaction(async (tx): Promise<Outcome> => {
    if (!(await lockTask(tx, organizationId, id))) throw errors.notFound('Task');
    const state = await taskRunState(tx, organizationId, id);
    if (!state) throw errors.notFound('Task');
    if (state.in_flight) {
      throw new AppError('conflict', 'A run of this task is already pending or running');
    }
    // At the task's monthly cost limit no run is created either (checked with no run in flight
    // and the task locked, so its cost is not moving); the first refusal of a period is recorded.
    const overCost = await refuseOverCostLimit(deps, tx, organizationId, id, state, now);
    if (overCost) return { overCost };
    // At the plan's run limit no run is created. The refusal is recorded (committed, not
    // thrown away with a rollback) so that the organization is told once per period.
    const allowance = (await lockRunAllowances(tx, [organizationId], now)).get(organizationId);
    if (allowance && allowance.remaining <= 0) {
      const told = (await recordRunLimitReached(tx, [allowance], now)).length > 0;
      return { refused: allowance, told };
    }
    // With its NOTIFY svc_runs, named by the run, so that this process's worker, woken at the
    // commit (below), leaves the notification out.
    const run = await insertRun(tx, newRun, { notify: true });
    return { run };
  });
  if ('run' in created) deps.signals.emit('svc_runs', created.run.id);
  if ('overCost' in created) throw new AppError('conflict', created.overCost);
  if ('refused' in created) {
    const a = created.refused;
    if (created.told) {
      deps.log.warn(
        { organizationId, runsLimit: a.runsLimit, periodStart: a.periodStart, periodEnd: a.periodEnd },
        "organization reached its plan's run limit: run now is refused until the period ends",
      );
    }
    throw errors.planLimit(runLimitMessage(a));
  }
  return runView(created.run);
}
