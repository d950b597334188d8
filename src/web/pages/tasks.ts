// Tasks: the list, one form for creating and editing (with a schedule preview), the task page
// with its runs, run now, pause/resume and delete (with a confirmation page).
//
// The first part of this module holds what every resource page shares: turning a form into the
// API's request body and checking it with the API's own schemas (the same Ajv options as the
// JSON API's body validator, and the same error details), problem lists, time and money
// formatting, the not-found and confirmation pages, and the runs table.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyReply } from 'fastify';
import type { TSchema } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import { listRuns, listTaskRuns } from '../../domain/runs.ts';
import { listSkills } from '../../domain/skills.ts';
import { listSources } from '../../domain/sources.ts';
import {
  createTask,
  deleteTaskOf,
  getTask,
  listOrganizationTasks,
  runTaskNow,
  updateTaskOf,
} from '../../domain/tasks.ts';
import type { Viewer } from '../../domain/users.ts';
import { toAppError } from '../../http/plugins/errors.ts';
import { AppError, type ErrorDetail } from '../../lib/errors.ts';
import {
  checkCronExpression,
  firstSlot,
  isValidScheduleTime,
  isValidTimezone,
  type ScheduleSpec,
  upcomingSlots,
  WEEKDAYS,
  type Weekday,
} from '../../scheduler/slots.ts';
import type { Run } from '../../schemas/run.ts';
import {
  DESTINATION_TYPES,
  SCHEDULES,
  type Task,
  TaskCreateBody,
  TaskUpdateBody,
} from '../../schemas/task.ts';
import { type FormBody, field, fields, formOf, viewerOrRedirect } from '../auth.ts';
import { type Html, html, raw } from '../html.ts';
import { badge, csrfField, page } from '../layout.ts';
import type { WebScope } from '../plugin.ts';

// =============================================================================================
// Shared by the page modules

export type Flash = { kind: 'ok' | 'error'; text: string } | undefined;

export function sendHtml(reply: FastifyReply, status: number, markup: string) {
  return reply.code(status).type('text/html; charset=utf-8').send(markup);
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Ids in paths are checked before they reach SQL: anything else is simply not found. */
export const isUuid = (s: string) => UUID_RE.test(s);

/** The value of `fn`, or undefined when the domain says not found (another organization's id too). */
export async function found<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof AppError && err.code === 'not_found') return undefined;
    throw err;
  }
}

export function notFoundPage(
  reply: FastifyReply,
  viewer: Viewer,
  section: string,
  what: string,
  back: { href: string; label: string },
) {
  return sendHtml(
    reply,
    404,
    page(
      { title: `${what} not found`, viewer, section },
      html`<h1>${what} not found</h1>
<p>It does not exist, or it was deleted.</p>
<p><a href="${back.href}">${back.label}</a></p>`,
    ),
  );
}

/** A confirmation page for a destructive action: a form, so no script is needed. */
export function confirmPage(
  viewer: Viewer,
  o: {
    section: string;
    title: string;
    question: Html | string;
    action: string;
    cancel: string;
    button: string;
  },
): string {
  return page(
    { title: o.title, viewer, section: o.section },
    html`<h1>${o.title}</h1>
<p>${o.question}</p>
<form method="post" action="${o.action}" class="row">${csrfField(viewer.csrfToken)}
  <button type="submit" class="danger">${o.button}</button>
  <a class="button secondary" href="${o.cancel}">Cancel</a>
</form>`,
  );
}

// ajv-formats is CommonJS: under ESM its default import is the plugin function itself.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
// The options of the JSON API's body validator (src/http/plugins/validation.ts): exact types.
const bodyAjv = addFormats(
  new Ajv({ allErrors: true, useDefaults: true, removeAdditional: false, strict: false, coerceTypes: false }),
);
const validators = new WeakMap<object, ValidateFunction>();

/**
 * Checks a request body made from a form against the API's schema. The problems come back as
 * the API reports them (`/body/...` paths, the same messages), or undefined when it is valid.
 */
export function schemaProblems(schema: TSchema, body: unknown): AppError | undefined {
  let validate = validators.get(schema);
  if (!validate) {
    validate = bodyAjv.compile(schema as object);
    validators.set(schema, validate);
  }
  if (validate(body)) return undefined;
  // A form field left empty is "must NOT have fewer than 1 characters" to Ajv; say it plainly.
  const issues = (validate.errors ?? []).map((e: ErrorObject) =>
    e.keyword === 'minLength' && e.params.limit === 1 ? { ...e, message: 'must not be empty' } : e,
  );
  return toAppError(
    Object.assign(new Error('invalid form'), { validation: issues, validationContext: 'body' }),
  );
}

/** The same error with more details (problems the schema cannot see, found at once). */
export function withDetails(err: AppError, more: ErrorDetail[]): AppError {
  const have = new Set((err.details ?? []).map((d) => d.path));
  const details = [...(err.details ?? []), ...more.filter((d) => !have.has(d.path))];
  return new AppError(err.code, err.message, { details });
}

/** A readable name for a detail's path: `/body/destinations/1/value` → "Destinations #2 value". */
export function fieldLabel(path: string, labels: Record<string, string>): string {
  const parts = path
    .replace(/^\/body\/?/, '')
    .split('/')
    .filter(Boolean);
  if (parts.length === 0) return 'Form';
  return parts
    .map((p) => (/^\d+$/.test(p) ? `#${Number(p) + 1}` : (labels[p] ?? p)))
    .filter(Boolean)
    .join(' ');
}

/** The problems of a failed save, listed above the form: field and message, each. */
export function problemsFlash(err: AppError | undefined, labels: Record<string, string>): Html | '' {
  if (!err) return '';
  const details = err.details ?? [];
  if (details.length === 0) return html`<div class="flash error" role="alert">${err.message}</div>`;
  return html`<div class="flash error" role="alert">
<p>${details.length === 1 ? 'Please correct this problem:' : 'Please correct these problems:'}</p>
<ul>${details.map((d) => html`<li><strong>${fieldLabel(d.path, labels)}</strong>: ${d.message}</li>`)}</ul>
</div>`;
}

/** `aria-invalid` on an input whose field has a problem. */
export function invalid(err: AppError | undefined, name: string): Html | '' {
  const prefix = `/body/${name}`;
  const hit = err?.details?.some((d) => d.path === prefix || d.path.startsWith(`${prefix}/`));
  return hit ? raw('aria-invalid="true"') : '';
}

/** A flash from a `?done=` parameter after a redirect (post/redirect/get). */
export function doneFlash(query: unknown, texts: Record<string, string>): Flash {
  const done = (query as { done?: unknown } | undefined)?.done;
  const text = typeof done === 'string' ? texts[done] : undefined;
  return text ? { kind: 'ok', text } : undefined;
}

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-GB', {
      timeZone: isValidTimezone(timeZone) ? timeZone : 'UTC',
      weekday: 'short',
      day: 'numeric',
      month: 'short',
      year: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
      timeZoneName: 'short',
    });
    if (formatters.size > 500) formatters.clear();
    formatters.set(timeZone, f);
  }
  return f;
}

/** An instant as local time in a timezone ("Mon, 9 Mar 2027, 09:00 CET"), machine-readable too. */
export function when(instant: string | Date | null | undefined, timeZone = 'UTC'): Html | string {
  if (!instant) return '—';
  const d = typeof instant === 'string' ? new Date(instant) : instant;
  if (Number.isNaN(d.getTime())) return '—';
  return html`<time datetime="${d.toISOString()}">${formatterOf(timeZone).format(d)}</time>`;
}

export function formatDuration(ms: number | undefined): string {
  if (ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** Cents as dollars: fractions of a cent are common, so small amounts keep four decimals. */
export function formatCost(cents: number | undefined): string {
  if (cents === undefined) return '—';
  if (cents === 0) return '$0.00';
  return `$${(cents / 100).toFixed(cents < 100 ? 4 : 2)}`;
}

export const formatCount = (n: number | undefined) => (n === undefined ? '—' : n.toLocaleString('en-US'));

/** A table of runs, newest first; with `tasks`, a task column too. */
export function runsTable(runs: Run[], o: { tasks?: Map<string, Task>; timezone?: string } = {}): Html {
  if (runs.length === 0) return html`<p class="muted">No runs yet.</p>`;
  return html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Created</th>${o.tasks ? html`<th scope="col">Task</th>` : ''}<th scope="col">Status</th><th scope="col">Duration</th><th scope="col">Tokens</th><th scope="col">Cost</th><th scope="col">Delivery</th></tr></thead>
<tbody>${runs.map((r) => {
    const task = r.taskId ? o.tasks?.get(r.taskId) : undefined;
    const tz = task?.timezone ?? o.timezone ?? 'UTC';
    return html`<tr>
<td><a href="/dashboard/runs/${r.id ?? ''}">${when(r.createdAt, tz)}</a></td>
${o.tasks ? html`<td>${task ? html`<a href="/dashboard/tasks/${task.id}">${task.name}</a>` : html`<span class="muted">deleted task</span>`}</td>` : ''}
<td>${badge(r.status)}</td><td>${formatDuration(r.durationMs)}</td><td>${formatCount(r.tokensUsed)}</td>
<td>${formatCost(r.costCents)}</td><td>${r.deliveryStatus ? badge(r.deliveryStatus) : html`<span class="muted">none</span>`}</td>
</tr>`;
  })}</tbody></table></div>`;
}

// =============================================================================================
// Schedules in words, and their preview

const DAY_ABBR: Record<Weekday, string> = {
  monday: 'Mon',
  tuesday: 'Tue',
  wednesday: 'Wed',
  thursday: 'Thu',
  friday: 'Fri',
  saturday: 'Sat',
  sunday: 'Sun',
};

type ScheduleOf = Pick<Task, 'schedule' | 'scheduleTime' | 'scheduleDays' | 'cronExpression' | 'timezone'>;

/** "Every day at 09:00 (Europe/Paris)", "Weekly on Mon, Wed at 08:30 (UTC)", "Hourly at :15", ... */
export function scheduleInWords(t: ScheduleOf): Html {
  const tz = t.timezone ?? 'UTC';
  if (t.cronExpression) return html`Cron <code>${t.cronExpression}</code> (${tz})`;
  const time = t.scheduleTime ?? '09:00';
  switch (t.schedule) {
    case 'once':
      return t.scheduleTime ? html`Once at ${t.scheduleTime} (${tz})` : html`Once`;
    case 'hourly':
      return html`Hourly at :${(t.scheduleTime ?? '00:00').slice(3, 5)}`;
    case 'daily':
      return html`Every day at ${time} (${tz})`;
    case 'weekly': {
      const days = WEEKDAYS.filter((d) => t.scheduleDays?.includes(d)).map((d) => DAY_ABBR[d]);
      return html`Weekly on ${days.length ? days.join(', ') : 'the day it was saved'} at ${time} (${tz})`;
    }
  }
}

const MODES = [...SCHEDULES, 'cron'] as const;
type Mode = (typeof MODES)[number];
const MODE_LABELS: Record<Mode, string> = {
  once: 'Once',
  hourly: 'Hourly',
  daily: 'Daily',
  weekly: 'Weekly',
  cron: 'Cron expression',
};

interface ScheduleInput {
  mode: string;
  scheduleTime: string;
  scheduleDays: string[];
  timezone: string;
  cronExpression: string;
}

/** What is wrong with a schedule as entered, by the domain's own rules (slots.ts). */
function scheduleProblems(s: ScheduleInput): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  if (!(MODES as readonly string[]).includes(s.mode)) {
    details.push({ path: '/body/schedule', message: `must be one of: ${MODES.join(', ')}` });
  }
  if (s.timezone && !isValidTimezone(s.timezone)) {
    details.push({ path: '/body/timezone', message: 'is not an IANA timezone name' });
  }
  if (s.mode === 'cron') {
    const cron = checkCronExpression(s.cronExpression);
    if (!cron.ok) details.push({ path: '/body/cronExpression', message: cron.message });
  } else {
    if (s.scheduleTime && !isValidScheduleTime(s.scheduleTime)) {
      details.push({ path: '/body/scheduleTime', message: 'must be a time HH:MM (24-hour)' });
    }
    if (s.scheduleDays.some((d) => !(WEEKDAYS as readonly string[]).includes(d))) {
      details.push({ path: '/body/scheduleDays', message: `must be among: ${WEEKDAYS.join(', ')}` });
    }
  }
  return details;
}

function specOf(s: ScheduleInput): ScheduleSpec {
  const timezone = s.timezone || 'UTC';
  if (s.mode === 'cron') return { schedule: 'once', cronExpression: s.cronExpression, timezone };
  return {
    schedule: s.mode as ScheduleSpec['schedule'],
    scheduleTime: s.scheduleTime || null,
    scheduleDays: s.mode === 'weekly' ? (s.scheduleDays as Weekday[]) : null,
    timezone,
  };
}

function slotList(slots: Date[], timezone: string, note?: string): Html {
  if (slots.length === 0) return html`<p class="muted">No further run.</p>`;
  return html`<p class="muted">${note ?? `Next ${slots.length === 1 ? 'run' : `${slots.length} runs`}`} (${timezone}):</p>
<ol>${slots.map((s) => html`<li>${when(s, timezone)}</li>`)}</ol>`;
}

/** The next five slots of a schedule as entered, counted from now (as saving it would). */
export function schedulePreview(s: ScheduleInput, now: Date): Html {
  const problems = scheduleProblems(s);
  if (problems.length > 0) {
    return html`<p class="muted">No preview: ${problems.map((p, i) => html`${i ? '; ' : ''}${fieldLabel(p.path, TASK_LABELS)}: ${p.message}`)}.</p>`;
  }
  const spec = specOf(s);
  try {
    const first = firstSlot(spec, now);
    if (!first) return slotList([], spec.timezone);
    if (!spec.cronExpression && spec.schedule === 'once') {
      return slotList(
        [first],
        spec.timezone,
        spec.scheduleTime ? 'Runs once' : 'Runs once, as soon as it is saved',
      );
    }
    return slotList([first, ...upcomingSlots(spec, first, 4)], spec.timezone);
  } catch (err) {
    if (err instanceof RangeError) return html`<p class="muted">No preview: ${err.message}.</p>`;
    throw err;
  }
}

/** The next five slots of a saved task: from its nextRunAt when active, else as if resumed now. */
function savedPreview(task: Task, now: Date): Html {
  const tz = task.timezone ?? 'UTC';
  if (task.status === 'active') {
    if (!task.nextRunAt) return html`<p class="muted">No further run is scheduled.</p>`;
    const next = new Date(task.nextRunAt);
    const spec: ScheduleSpec = {
      schedule: task.schedule,
      scheduleTime: task.scheduleTime ?? null,
      scheduleDays: task.scheduleDays ?? null,
      cronExpression: task.cronExpression ?? null,
      timezone: tz,
    };
    const rest = !task.cronExpression && task.schedule === 'once' ? [] : upcomingSlots(spec, next, 4);
    return slotList([next, ...rest], tz);
  }
  return html`<p class="muted">The task is ${task.status}; if it were resumed now:</p>${schedulePreview(scheduleOfTask(task), now)}`;
}

function scheduleOfTask(task: Task): ScheduleInput {
  return {
    mode: task.cronExpression ? 'cron' : task.schedule,
    scheduleTime: task.scheduleTime ?? '',
    scheduleDays: task.scheduleDays ?? [],
    timezone: task.timezone ?? 'UTC',
    cronExpression: task.cronExpression ?? '',
  };
}

// =============================================================================================
// The task form

const TASK_LABELS: Record<string, string> = {
  name: 'Name',
  prompt: 'Prompt',
  model: 'Model',
  schedule: 'Schedule',
  status: 'Status',
  scheduleTime: 'Time',
  scheduleDays: 'Days',
  timezone: 'Timezone',
  cronExpression: 'Cron expression',
  skillIds: 'Skill',
  sourceIds: 'Source',
  destinations: 'Destination',
  type: 'type',
  value: 'value',
  label: 'label',
};

/** Rows of the destination table beyond the task's own. */
const EXTRA_DESTINATION_ROWS = 3;
const MAX_DESTINATION_ROWS = 20 + EXTRA_DESTINATION_ROWS;

interface DestinationValues {
  type: string;
  value: string;
  label: string;
}

interface TaskValues extends ScheduleInput {
  name: string;
  prompt: string;
  model: string;
  skillIds: string[];
  sourceIds: string[];
  destinations: DestinationValues[];
}

function valuesOfTask(task: Task): TaskValues {
  return {
    name: task.name,
    prompt: task.prompt,
    model: task.model,
    ...scheduleOfTask(task),
    skillIds: task.skillIds ?? [],
    sourceIds: task.sourceIds ?? [],
    destinations: (task.destinations ?? []).map((d) => ({
      type: d.type,
      value: d.value,
      label: d.label ?? '',
    })),
  };
}

function newTaskValues(deps: Deps): TaskValues {
  return {
    name: '',
    prompt: '',
    model: deps.models.defaultModel.routerModelId,
    mode: 'daily',
    scheduleTime: '09:00',
    scheduleDays: [],
    timezone: 'UTC',
    cronExpression: '',
    skillIds: [],
    sourceIds: [],
    destinations: [],
  };
}

/** `<input type=time>` may send seconds; the API takes HH:MM. */
const timeOf = (s: string) => (/^\d\d:\d\d:00(\.0+)?$/.test(s) ? s.slice(0, 5) : s);

function scheduleInputOf(form: FormBody): ScheduleInput {
  return {
    mode: field(form, 'mode'),
    scheduleTime: timeOf(field(form, 'scheduleTime')),
    scheduleDays: fields(form, 'scheduleDays'),
    timezone: field(form, 'timezone'),
    cronExpression: field(form, 'cronExpression'),
  };
}

function valuesOfForm(form: FormBody): TaskValues {
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
    skillIds: fields(form, 'skillIds'),
    sourceIds: fields(form, 'sourceIds'),
    destinations,
  };
}

const destinationBodies = (list: DestinationValues[]) =>
  list.map((d) => ({ type: d.type, value: d.value, ...(d.label && { label: d.label }) }));

function createBodyOf(v: TaskValues, organizationId: string): Record<string, unknown> {
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
  return body;
}

/**
 * The PATCH for a task from its whole form. Lists are sent only when they changed (a task
 * PATCH with `destinations` gives every destination a new id; a list sent as is would reorder
 * skills and sources to the checkbox order); the model only when another one was chosen (a
 * model that has left the catalog may stay).
 */
function patchOf(deps: Deps, v: TaskValues, task: Task): Record<string, unknown> {
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
  return patch;
}

let timezoneOptions: Html | undefined;
function timezoneDatalist(): Html {
  if (!timezoneOptions) {
    const zones = Intl.supportedValuesOf('timeZone');
    if (!zones.includes('UTC')) zones.unshift('UTC');
    timezoneOptions = html`<datalist id="timezones">${zones.map((z) => html`<option value="${z}"></option>`)}</datalist>`;
  }
  return timezoneOptions;
}

function modelSelect(deps: Deps, chosen: string, err: AppError | undefined): Html {
  const models = deps.models.list();
  const selected = deps.models.find(chosen);
  const providers = [...new Set(models.map((m) => m.provider))];
  return html`<select id="model" name="model" ${invalid(err, 'model')}>
${chosen && !selected ? html`<option value="${chosen}" selected>${chosen} (not in the catalog)</option>` : ''}
${providers.map(
  (p) =>
    html`<optgroup label="${p}">${models
      .filter((m) => m.provider === p)
      .map(
        (m) =>
          html`<option value="${m.routerModelId}" ${selected?.id === m.id ? raw('selected') : ''}>${m.name}${m.default ? ' (default)' : ''}${m.supportsToolCalling ? '' : ' (no tools)'}</option>`,
      )}</optgroup>`,
)}
</select>`;
}

// Progressive enhancement: the preview follows the schedule fields as they change.
const PREVIEW_SCRIPT = raw(`<script>
(() => {
  const form = document.getElementById('task-form');
  const box = document.getElementById('schedule');
  const out = document.getElementById('schedule-preview');
  if (!form || !box || !out || !window.fetch) return;
  let timer;
  const refresh = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const data = new FormData(form);
      const q = new URLSearchParams();
      for (const k of ['mode', 'scheduleTime', 'timezone', 'cronExpression']) q.set(k, String(data.get(k) ?? ''));
      for (const d of data.getAll('scheduleDays')) q.append('scheduleDays', String(d));
      try {
        const res = await fetch('/dashboard/schedule-preview?' + q.toString(), { credentials: 'same-origin' });
        if (res.ok) out.innerHTML = await res.text();
      } catch {}
    }, 250);
  };
  box.addEventListener('change', refresh);
  box.addEventListener('input', refresh);
})();
</script>`);

async function taskFormPage(
  deps: Deps,
  viewer: Viewer,
  o: { task?: Task; values: TaskValues; error?: AppError | undefined; preview: Html },
): Promise<string> {
  const { task, values: v, error: err } = o;
  const [skills, sources] = await Promise.all([
    listSkills(deps, viewer.organizationId),
    listSources(deps, viewer.organizationId),
  ]);
  const action = task ? `/dashboard/tasks/${task.id}` : '/dashboard/tasks';
  const title = task ? `Edit ${task.name}` : 'New task';
  const rows: DestinationValues[] = [
    ...v.destinations,
    ...Array.from({ length: EXTRA_DESTINATION_ROWS }, () => ({ type: 'email', value: '', label: '' })),
  ].slice(0, MAX_DESTINATION_ROWS);
  const checked = (on: boolean) => (on ? raw('checked') : '');

  return page(
    { title, viewer, section: '/dashboard/tasks' },
    html`<h1>${title}</h1>
${problemsFlash(err, TASK_LABELS)}
<form class="stack" id="task-form" method="post" action="${action}">${csrfField(viewer.csrfToken)}
  <div><label for="name">Name</label><input id="name" name="name" required maxlength="255" value="${v.name}" ${invalid(err, 'name')}></div>
  <div><label for="prompt">Prompt</label><textarea id="prompt" name="prompt" required rows="8" ${invalid(err, 'prompt')}>${v.prompt}</textarea></div>
  <div><label for="model">Model</label>${modelSelect(deps, v.model, err)}</div>
  <fieldset id="schedule"><legend>Schedule</legend>
    <div class="row" role="radiogroup" aria-label="Repeat" ${invalid(err, 'schedule')}>${MODES.map(
      (m) =>
        html`<label style="font-weight:400"><input type="radio" style="width:auto" name="mode" value="${m}" ${checked(v.mode === m)}> ${MODE_LABELS[m]}</label>`,
    )}</div>
    <div><label for="scheduleTime">Time</label><input id="scheduleTime" name="scheduleTime" type="time" value="${v.scheduleTime}" aria-describedby="scheduleTime-help" ${invalid(err, 'scheduleTime')}>
      <p class="muted" id="scheduleTime-help">Local time in the timezone. Daily and weekly default to 09:00; hourly uses the minutes only; once without a time runs as soon as it is saved.</p></div>
    <fieldset ${invalid(err, 'scheduleDays')}><legend>Days (weekly)</legend><div class="row">${WEEKDAYS.map(
      (d) =>
        html`<label style="font-weight:400"><input type="checkbox" name="scheduleDays" value="${d}" ${checked(v.scheduleDays.includes(d))}> ${DAY_ABBR[d]}</label>`,
    )}</div></fieldset>
    <div><label for="timezone">Timezone</label><input id="timezone" name="timezone" list="timezones" autocomplete="off" spellcheck="false" value="${v.timezone}" ${invalid(err, 'timezone')}>${timezoneDatalist()}</div>
    <div><label for="cronExpression">Cron expression</label><input id="cronExpression" name="cronExpression" placeholder="0 9 * * 1-5" spellcheck="false" value="${v.cronExpression}" aria-describedby="cron-help" ${invalid(err, 'cronExpression')}>
      <p class="muted" id="cron-help">Used when "Cron expression" is chosen: minute hour day-of-month month day-of-week, in the timezone.</p></div>
    <div><strong>Preview</strong><div id="schedule-preview" aria-live="polite">${o.preview}</div></div>
  </fieldset>
  <fieldset ${invalid(err, 'skillIds')}><legend>Skills</legend>${
    skills.length
      ? skills.map(
          (s) =>
            html`<label style="font-weight:400"><input type="checkbox" name="skillIds" value="${s.id}" ${checked(v.skillIds.includes(s.id))}> ${s.name}</label>`,
        )
      : html`<p class="muted">No skills yet. <a href="/dashboard/skills/new">Create one</a>.</p>`
  }</fieldset>
  <fieldset ${invalid(err, 'sourceIds')}><legend>Sources</legend>${
    sources.length
      ? sources.map(
          (s) =>
            html`<label style="font-weight:400"><input type="checkbox" name="sourceIds" value="${s.id}" ${checked(v.sourceIds.includes(s.id))}> ${s.name} <span class="muted">(${s.type})</span></label>`,
        )
      : html`<p class="muted">No sources yet. <a href="/dashboard/sources/new">Create one</a>.</p>`
  }</fieldset>
  <fieldset ${invalid(err, 'destinations')}><legend>Destinations</legend>
    <p class="muted">Where each finished run is sent. Leave a row empty to remove it.</p>
    <input type="hidden" name="destRows" value="${rows.length}">
    <div class="table-wrap"><table><thead><tr><th scope="col">Type</th><th scope="col">E-mail, phone number or URL</th><th scope="col">Label (optional)</th></tr></thead><tbody>
    ${rows.map(
      (d, i) => html`<tr>
      <td><select name="dest${i}Type" aria-label="Destination ${i + 1} type">${DESTINATION_TYPES.map(
        (t) => html`<option value="${t}" ${d.type === t ? raw('selected') : ''}>${t}</option>`,
      )}</select></td>
      <td><input name="dest${i}Value" aria-label="Destination ${i + 1} value" value="${d.value}"></td>
      <td><input name="dest${i}Label" aria-label="Destination ${i + 1} label" maxlength="255" value="${d.label}"></td></tr>`,
    )}
    </tbody></table></div>
  </fieldset>
  <div class="row"><button type="submit">${task ? 'Save task' : 'Create task'}</button>
    <a class="button secondary" href="${task ? `/dashboard/tasks/${task.id}` : '/dashboard/tasks'}">Cancel</a></div>
</form>
${PREVIEW_SCRIPT}`,
  );
}

// =============================================================================================
// The task page and the list

const runNowButton = (viewer: Viewer, task: Task, secondary = false) =>
  html`<form method="post" action="/dashboard/tasks/${task.id}/run" style="display:inline">${csrfField(viewer.csrfToken)}<button type="submit" ${secondary ? raw('class="secondary"') : ''}>Run now</button></form>`;

async function taskPage(deps: Deps, viewer: Viewer, task: Task, flash: Flash): Promise<string> {
  const org = viewer.organizationId;
  const [skills, sources, runs] = await Promise.all([
    listSkills(deps, org),
    listSources(deps, org),
    listTaskRuns(deps, org, task.id, 20),
  ]);
  const tz = task.timezone ?? 'UTC';
  const model = deps.models.find(task.model);
  const skillById = new Map(skills.map((s) => [s.id, s]));
  const sourceById = new Map(sources.map((s) => [s.id, s]));
  const nextStatus = task.status === 'active' ? 'paused' : 'active';
  return page(
    { title: task.name, viewer, section: '/dashboard/tasks', flash },
    html`<h1>${task.name} ${badge(task.status)}</h1>
<div class="row" style="margin-bottom:1rem">
  ${runNowButton(viewer, task)}
  <form method="post" action="/dashboard/tasks/${task.id}/status" style="display:inline">${csrfField(viewer.csrfToken)}
    <input type="hidden" name="status" value="${nextStatus}"><button type="submit" class="secondary">${nextStatus === 'paused' ? 'Pause' : 'Resume'}</button></form>
  <a class="button secondary" href="/dashboard/tasks/${task.id}/edit">Edit</a>
  <a class="button secondary" href="/dashboard/tasks/${task.id}/delete">Delete</a>
</div>
<div class="table-wrap"><table><tbody>
  <tr><th scope="row">Schedule</th><td>${scheduleInWords(task)}</td></tr>
  <tr><th scope="row">Next run</th><td>${task.nextRunAt ? when(task.nextRunAt, tz) : html`<span class="muted">none</span>`}</td></tr>
  <tr><th scope="row">Last run</th><td>${task.lastRunAt ? when(task.lastRunAt, tz) : html`<span class="muted">never</span>`}</td></tr>
  <tr><th scope="row">Model</th><td>${model ? html`${model.name} <span class="muted">(${model.provider}, ${model.routerModelId})</span>` : html`${task.model} <span class="muted">(not in the catalog: runs will fail)</span>`}</td></tr>
  <tr><th scope="row">Skills</th><td>${(task.skillIds ?? []).length ? (task.skillIds ?? []).map((id, i) => html`${i ? ', ' : ''}<a href="/dashboard/skills/${id}">${skillById.get(id)?.name ?? id}</a>`) : html`<span class="muted">none</span>`}</td></tr>
  <tr><th scope="row">Sources</th><td>${(task.sourceIds ?? []).length ? (task.sourceIds ?? []).map((id, i) => html`${i ? ', ' : ''}<a href="/dashboard/sources/${id}">${sourceById.get(id)?.name ?? id}</a>`) : html`<span class="muted">none</span>`}</td></tr>
  <tr><th scope="row">Destinations</th><td>${(task.destinations ?? []).length ? html`<ul>${(task.destinations ?? []).map((d) => html`<li>${d.type}: ${d.value}${d.label ? html` <span class="muted">(${d.label})</span>` : ''}</li>`)}</ul>` : html`<span class="muted">none</span>`}</td></tr>
</tbody></table></div>
<h2>Prompt</h2>
<div class="output" style="white-space:pre-wrap">${task.prompt}</div>
<h2>Runs</h2>
${runsTable(runs, { timezone: tz })}`,
  );
}

/** The newest run of each task: from the organization's recent runs, then per task for the rest. */
async function latestRuns(deps: Deps, organizationId: string, tasks: Task[]): Promise<Map<string, Run>> {
  const latest = new Map<string, Run>();
  for (const run of await listRuns(deps, organizationId, 100)) {
    if (run.taskId && !latest.has(run.taskId)) latest.set(run.taskId, run);
  }
  for (const task of tasks) {
    if (task.lastRunAt && !latest.has(task.id)) {
      const [run] = await listTaskRuns(deps, organizationId, task.id, 1);
      if (run) latest.set(task.id, run);
    }
  }
  return latest;
}

async function taskListPage(deps: Deps, viewer: Viewer, flash: Flash): Promise<string> {
  const tasks = await listOrganizationTasks(deps, viewer.organizationId);
  const latest = await latestRuns(deps, viewer.organizationId, tasks);
  return page(
    { title: 'Tasks', viewer, section: '/dashboard/tasks', flash },
    html`<div class="row" style="justify-content:space-between"><h1>Tasks</h1><a class="button" href="/dashboard/tasks/new">New task</a></div>
${
  tasks.length === 0
    ? html`<p>No tasks yet. <a href="/dashboard/tasks/new">Create your first task</a>.</p>`
    : html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Schedule</th><th scope="col">Next run</th><th scope="col">Last run</th><th scope="col">Actions</th></tr></thead>
<tbody>${tasks.map((t) => {
        const last = latest.get(t.id);
        return html`<tr>
<td><a href="/dashboard/tasks/${t.id}">${t.name}</a></td>
<td>${badge(t.status)}</td>
<td>${scheduleInWords(t)}</td>
<td>${t.nextRunAt ? when(t.nextRunAt, t.timezone) : html`<span class="muted">none</span>`}</td>
<td>${last ? html`<a href="/dashboard/runs/${last.id ?? ''}">${badge(last.status)}</a>` : html`<span class="muted">never</span>`}</td>
<td class="row">${runNowButton(viewer, t, true)}<a class="button secondary" href="/dashboard/tasks/${t.id}/edit">Edit</a></td>
</tr>`;
      })}</tbody></table></div>`
}`,
  );
}

const TASK_DONE: Record<string, string> = {
  created: 'Task created.',
  saved: 'Task saved.',
  paused: 'Task paused.',
  active: 'Task resumed.',
  deleted: 'Task deleted.',
};

// =============================================================================================
// Routes

type IdParams = { Params: { id: string } };

export function taskPages(scope: WebScope, deps: Deps): void {
  const section = '/dashboard/tasks';
  const missing = (reply: FastifyReply, viewer: Viewer) =>
    notFoundPage(reply, viewer, section, 'Task', { href: section, label: 'Back to tasks' });
  const taskOf = (viewer: Viewer, id: string) =>
    isUuid(id) ? found(() => getTask(deps, viewer.organizationId, id)) : Promise.resolve(undefined);

  scope.get(section, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    return sendHtml(reply, 200, await taskListPage(deps, viewer, doneFlash(request.query, TASK_DONE)));
  });

  scope.get(`${section}/new`, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    const values = newTaskValues(deps);
    const preview = schedulePreview(values, deps.clock.now());
    return sendHtml(reply, 200, await taskFormPage(deps, viewer, { values, preview }));
  });

  // A fragment fetched by the form's script: signed out, it is a bare 401 (a redirect would be
  // followed by fetch and put the sign-in page inside the form).
  scope.get('/dashboard/schedule-preview', async (request, reply) => {
    if (!request.viewer) return sendHtml(reply, 401, '');
    const fragment = schedulePreview(scheduleInputOf(request.query as FormBody), deps.clock.now());
    return sendHtml(reply, 200, fragment.value);
  });

  scope.post(section, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    const values = valuesOfForm(formOf(request));
    const body = createBodyOf(values, viewer.organizationId);
    const again = async (err: AppError) =>
      sendHtml(
        reply,
        err.status,
        await taskFormPage(deps, viewer, {
          values,
          error: err,
          preview: schedulePreview(values, deps.clock.now()),
        }),
      );
    const invalidBody = schemaProblems(TaskCreateBody, body);
    if (invalidBody) return again(withDetails(invalidBody, scheduleProblems(values)));
    try {
      const task = await createTask(deps, viewer.organizationId, body as TaskCreateBody);
      return reply.redirect(`${section}/${task.id}?done=created`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return again(err);
    }
  });

  scope.get<IdParams>(`${section}/:id`, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    const task = await taskOf(viewer, request.params.id);
    if (!task) return missing(reply, viewer);
    return sendHtml(reply, 200, await taskPage(deps, viewer, task, doneFlash(request.query, TASK_DONE)));
  });

  scope.get<IdParams>(`${section}/:id/edit`, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    const task = await taskOf(viewer, request.params.id);
    if (!task) return missing(reply, viewer);
    const preview = savedPreview(task, deps.clock.now());
    return sendHtml(
      reply,
      200,
      await taskFormPage(deps, viewer, { task, values: valuesOfTask(task), preview }),
    );
  });

  scope.post<IdParams>(`${section}/:id`, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    const task = await taskOf(viewer, request.params.id);
    if (!task) return missing(reply, viewer);
    const values = valuesOfForm(formOf(request));
    const patch = patchOf(deps, values, task);
    const again = async (err: AppError) =>
      sendHtml(
        reply,
        err.status,
        await taskFormPage(deps, viewer, {
          task,
          values,
          error: err,
          preview: schedulePreview(values, deps.clock.now()),
        }),
      );
    const invalidBody = schemaProblems(TaskUpdateBody, patch);
    if (invalidBody) return again(withDetails(invalidBody, scheduleProblems(values)));
    try {
      await updateTaskOf(deps, viewer.organizationId, task.id, patch as TaskUpdateBody);
      return reply.redirect(`${section}/${task.id}?done=saved`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (err.code === 'not_found') return missing(reply, viewer);
      return again(err);
    }
  });

  scope.post<IdParams>(`${section}/:id/run`, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    const task = await taskOf(viewer, request.params.id);
    if (!task) return missing(reply, viewer);
    try {
      const run = await runTaskNow(deps, viewer.organizationId, task.id);
      return reply.redirect(`/dashboard/runs/${run.id ?? ''}`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (err.code === 'not_found') return missing(reply, viewer);
      return sendHtml(
        reply,
        err.status,
        await taskPage(deps, viewer, task, { kind: 'error', text: err.message }),
      );
    }
  });

  scope.post<IdParams>(`${section}/:id/status`, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    const task = await taskOf(viewer, request.params.id);
    if (!task) return missing(reply, viewer);
    const patch = { status: field(formOf(request), 'status') };
    try {
      const invalidBody = schemaProblems(TaskUpdateBody, patch);
      if (invalidBody) throw invalidBody;
      const saved = await updateTaskOf(deps, viewer.organizationId, task.id, patch as TaskUpdateBody);
      return reply.redirect(`${section}/${task.id}?done=${saved.status}`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (err.code === 'not_found') return missing(reply, viewer);
      return sendHtml(
        reply,
        err.status,
        await taskPage(deps, viewer, task, { kind: 'error', text: err.message }),
      );
    }
  });

  scope.get<IdParams>(`${section}/:id/delete`, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    const task = await taskOf(viewer, request.params.id);
    if (!task) return missing(reply, viewer);
    return sendHtml(
      reply,
      200,
      confirmPage(viewer, {
        section,
        title: `Delete ${task.name}?`,
        question: html`The task <strong>${task.name}</strong>, its destinations and all its runs will be deleted. Usage it produced stays counted. This cannot be undone.`,
        action: `${section}/${task.id}/delete`,
        cancel: `${section}/${task.id}`,
        button: 'Delete task',
      }),
    );
  });

  scope.post<IdParams>(`${section}/:id/delete`, async (request, reply) => {
    const viewer = viewerOrRedirect(request, reply);
    if (!viewer) return reply;
    const id = request.params.id;
    if (!isUuid(id)) return missing(reply, viewer);
    const deleted = await found(() => deleteTaskOf(deps, viewer.organizationId, id).then(() => true));
    if (!deleted) return missing(reply, viewer);
    return reply.redirect(`${section}?done=deleted`, 303);
  });
}
