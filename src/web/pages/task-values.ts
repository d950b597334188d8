// The task form's values: from a task, from a posted form, and into the API's create and
// update bodies (the form is checked with the API's own schemas).
import type { Deps } from '../../domain/deps.ts';
import type { Task } from '../../schemas/task.ts';
import { type FormBody, field, fields } from '../auth.ts';
import {
  NO_RUN_CHECKS,
  type RunCheckValues,
  runCheckCreateFields,
  runCheckPatchFields,
  runCheckValuesOfForm,
  runCheckValuesOfTask,
} from './task-run-checks.ts';
import { type ScheduleInput, scheduleOfTask } from './task-schedule.ts';
import { costLimitCreate, costLimitPatch, costLimitValue } from './task-slots.ts';
import {
  newUnattendedValues,
  type UnattendedValues,
  unattendedBody,
  unattendedPatch,
  unattendedValuesOfForm,
  unattendedValuesOfTask,
} from './task-unattended.ts';

/** Rows of the destination table beyond the task's own. */
export const EXTRA_DESTINATION_ROWS = 3;
export const MAX_DESTINATION_ROWS = 20 + EXTRA_DESTINATION_ROWS;

export interface DestinationValues {
  type: string;
  value: string;
  label: string;
}

export interface TaskValues extends ScheduleInput {
  costLimit: string;
  name: string;
  prompt: string;
  model: string;
  skillIds: string[];
  sourceIds: string[];
  destinations: DestinationValues[];
  checks: RunCheckValues;
  unattended: UnattendedValues;
}

export function valuesOfTask(task: Task): TaskValues {
  return {
    name: task.name,
    prompt: task.prompt,
    model: task.model,
    ...scheduleOfTask(task),
    costLimit: costLimitValue(task),
    skillIds: task.skillIds ?? [],
    sourceIds: task.sourceIds ?? [],
    destinations: (task.destinations ?? []).map((d) => ({
      type: d.type,
      value: d.value,
      label: d.label ?? '',
    })),
    checks: runCheckValuesOfTask(task),
    unattended: unattendedValuesOfTask(task),
  };
}

export function newTaskValues(deps: Deps): TaskValues {
  return {
    name: '',
    prompt: '',
    model: deps.models.defaultModel.routerModelId,
    mode: 'daily',
    scheduleTime: '09:00',
    scheduleDays: [],
    timezone: 'UTC',
    cronExpression: '',
    costLimit: '',
    skillIds: [],
    sourceIds: [],
    destinations: [],
    checks: NO_RUN_CHECKS,
    unattended: newUnattendedValues(),
  };
}

/** `<input type=time>` may send seconds; the API takes HH:MM. */
const timeOf = (s: string) => (/^\d\d:\d\d:00(\.0+)?$/.test(s) ? s.slice(0, 5) : s);

export function scheduleInputOf(form: FormBody): ScheduleInput {
  return {
    mode: field(form, 'mode'),
    scheduleTime: timeOf(field(form, 'scheduleTime')),
    scheduleDays: fields(form, 'scheduleDays'),
    timezone: field(form, 'timezone'),
    cronExpression: field(form, 'cronExpression'),
  };
}

export function valuesOfForm(form: FormBody): TaskValues {
  const destinations: DestinationValues[] = [];
  const rows = Math.min(Number.parseInt(field(form, 'destRows'), 10) || 0, MAX_DESTINATION_ROWS);
  for (let i = 0; i < rows; i++) {
    const d = {
      type: field(form, `dest${i}Type`),
      value: field(form, `dest${i}Value`),
      label: field(form, `dest${i}Label`),
    };
    if (d.value || d.label) destinations.push(d);
  }
  return {
    name: field(form, 'name'),
    prompt: field(form, 'prompt'),
    model: field(form, 'model'),
    ...scheduleInputOf(form),
    costLimit: field(form, 'monthlyCostLimitCents'),
    skillIds: fields(form, 'skillIds'),
    sourceIds: fields(form, 'sourceIds'),
    destinations,
    checks: runCheckValuesOfForm(form),
    unattended: unattendedValuesOfForm(form),
  };
}

const destinationBodies = (list: DestinationValues[]) =>
  list.map((d) => ({ type: d.type, value: d.value, ...(d.label && { label: d.label }) }));

export function createBodyOf(v: TaskValues, organizationId: string): Record<string, unknown> {
  const body: Record<string, unknown> = { organizationId, name: v.name, prompt: v.prompt };
  if (v.model) body.model = v.model;
  if (v.timezone) body.timezone = v.timezone;
  if (v.mode === 'cron') body.cronExpression = v.cronExpression;
  else {
    body.schedule = v.mode;
    if (v.scheduleTime) body.scheduleTime = v.scheduleTime;
    if (v.mode === 'weekly' && v.scheduleDays.length > 0) body.scheduleDays = v.scheduleDays;
  }
  if (v.skillIds.length > 0) body.skillIds = v.skillIds;
  if (v.sourceIds.length > 0) body.sourceIds = v.sourceIds;
  if (v.destinations.length > 0) body.destinations = destinationBodies(v.destinations);
  return Object.assign(
    body,
    runCheckCreateFields(v.checks),
    unattendedBody(v.unattended),
    costLimitCreate(v.costLimit),
  );
}

/**
 * The PATCH for a task from its whole form. Lists are sent only when they changed (a task
 * PATCH with `destinations` gives every destination a new id; a list sent as is would reorder
 * skills and sources to the checkbox order); the model only when another one was chosen (a
 * model that has left the catalog may stay).
 */
export function patchOf(deps: Deps, v: TaskValues, task: Task): Record<string, unknown> {
  const patch: Record<string, unknown> = { name: v.name, prompt: v.prompt, timezone: v.timezone };
  if (v.model && v.model !== task.model) {
    const chosen = deps.models.find(v.model);
    if (!chosen || chosen.id !== deps.models.find(task.model)?.id) patch.model = v.model;
  }
  if (v.mode === 'cron') patch.cronExpression = v.cronExpression;
  else {
    patch.schedule = v.mode;
    patch.scheduleTime = v.scheduleTime || null;
    patch.cronExpression = null;
    if (v.mode === 'weekly') patch.scheduleDays = v.scheduleDays.length > 0 ? v.scheduleDays : null;
  }
  for (const key of ['skillIds', 'sourceIds'] as const) {
    const before = task[key] ?? [];
    const chosen = v[key];
    const kept = before.filter((id) => chosen.includes(id));
    const added = chosen.filter((id) => !before.includes(id));
    if (kept.length !== before.length || added.length > 0) patch[key] = [...kept, ...added];
  }
  const destinations = destinationBodies(v.destinations);
  const stored = destinationBodies(valuesOfTask(task).destinations);
  if (JSON.stringify(destinations) !== JSON.stringify(stored)) patch.destinations = destinations;
  return Object.assign(
    patch,
    runCheckPatchFields(v.checks, task),
    unattendedPatch(v.unattended, task),
    costLimitPatch(v.costLimit, task),
  );
}
