// Tasks: the list, one form for creating and editing (with a schedule preview), the task page
// with its runs, run now, pause/resume and delete (with a confirmation page).
import type { FastifyReply } from 'fastify';
import type { Deps } from '../../domain/deps.ts';
import { listRuns, listTaskRuns } from '../../domain/runs.ts';
import { listSkills } from '../../domain/skills.ts';
import { listSources } from '../../domain/sources.ts';
import {
  createTask,
  deleteOrganizationTask,
  getTask,
  listOrganizationTasks,
  runTaskNow,
  updateOrganizationTask,
} from '../../domain/tasks.ts';
import type { Viewer } from '../../domain/users.ts';
import { AppError } from '../../lib/errors.ts';
import { WEEKDAYS } from '../../schedule/slots.ts';
import type { Run } from '../../schemas/run.ts';
import { DESTINATION_TYPES, type Task, TaskCreateBody, TaskUpdateBody } from '../../schemas/task.ts';
import { type FormBody, field, formOf, viewerOf } from '../auth.ts';
import { inlineScript } from '../csp.ts';
import { type Html, html, raw } from '../html.ts';
import { badge, csrfField, page } from '../layout.ts';
import {
  catalogModelOptions,
  deleteRoutes,
  doneFlash,
  type Flash,
  found,
  invalid,
  isUuid,
  notFoundPage,
  problemsFlash,
  runsTable,
  schemaProblems,
  sendHtml,
  when,
  withDetails,
} from '../page-kit.ts';
import type { WebScope } from '../plugin.ts';
import { runCheckFieldset, runCheckRows, withRunCheckProblems } from './task-run-checks.ts';
import {
  DAY_ABBR,
  MODE_LABELS,
  MODES,
  savedPreview,
  scheduleInWords,
  schedulePreview,
  scheduleProblems,
  TASK_LABELS,
} from './task-schedule.ts';
import { costLimitField, taskSlotSections } from './task-slots.ts';
import { unattendedFieldset, unattendedSection } from './task-unattended.ts';

import {
  createBodyOf,
  type DestinationValues,
  EXTRA_DESTINATION_ROWS,
  MAX_DESTINATION_ROWS,
  newTaskValues,
  patchOf,
  scheduleInputOf,
  type TaskValues,
  valuesOfForm,
  valuesOfTask,
} from './task-values.ts';

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
  const selected = deps.models.find(chosen);
  return html`<select id="model" name="model" ${invalid(err, 'model')}>
${chosen && !selected ? html`<option value="${chosen}" selected>${chosen} (not in the catalog)</option>` : ''}
${catalogModelOptions(deps.models.list(), selected, (m) => `${m.default ? ' (default)' : ''}${m.supportsToolCalling ? '' : ' (no tools)'}`)}
</select>`;
}

// Progressive enhancement: the preview follows the schedule fields as they change.
const PREVIEW_SCRIPT = inlineScript(`
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
`);

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
        html`<label class="choice"><input type="radio" name="mode" value="${m}" ${checked(v.mode === m)}> ${MODE_LABELS[m]}</label>`,
    )}</div>
    <div><label for="scheduleTime">Time</label><input id="scheduleTime" name="scheduleTime" type="time" value="${v.scheduleTime}" aria-describedby="scheduleTime-help" ${invalid(err, 'scheduleTime')}>
      <p class="muted" id="scheduleTime-help">Local time in the timezone. Daily and weekly default to 09:00; hourly uses the minutes only; once without a time runs as soon as it is saved.</p></div>
    <fieldset ${invalid(err, 'scheduleDays')}><legend>Days (weekly)</legend><div class="row">${WEEKDAYS.map(
      (d) =>
        html`<label class="choice"><input type="checkbox" name="scheduleDays" value="${d}" ${checked(v.scheduleDays.includes(d))}> ${DAY_ABBR[d]}</label>`,
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
            html`<label class="choice"><input type="checkbox" name="skillIds" value="${s.id}" ${checked(v.skillIds.includes(s.id))}> ${s.name}</label>`,
        )
      : html`<p class="muted">No skills yet. <a href="/dashboard/skills/new">Create one</a>.</p>`
  }</fieldset>
  <fieldset ${invalid(err, 'sourceIds')}><legend>Sources</legend>${
    sources.length
      ? sources.map(
          (s) =>
            html`<label class="choice"><input type="checkbox" name="sourceIds" value="${s.id}" ${checked(v.sourceIds.includes(s.id))}> ${s.name} <span class="muted">(${s.type})</span></label>`,
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
  ${runCheckFieldset(v.checks, err)}
  ${unattendedFieldset(v.unattended, err)}
  ${costLimitField(v.costLimit, err)}
  <div class="row"><button type="submit">${task ? 'Save task' : 'Create task'}</button>
    <a class="button secondary" href="${task ? `/dashboard/tasks/${task.id}` : '/dashboard/tasks'}">Cancel</a></div>
</form>
${PREVIEW_SCRIPT}`,
  );
}

// =============================================================================================
// The task page and the list

const runNowButton = (viewer: Viewer, task: Task, secondary = false) =>
  html`<form method="post" action="/dashboard/tasks/${task.id}/run" class="inline">${csrfField(viewer.csrfToken)}<button type="submit" ${secondary ? raw('class="secondary"') : ''}>Run now</button></form>`;

async function taskPage(deps: Deps, viewer: Viewer, task: Task, flash: Flash): Promise<string> {
  const org = viewer.organizationId;
  const [skills, sources, runs, unattended, slots] = await Promise.all([
    listSkills(deps, org),
    listSources(deps, org),
    listTaskRuns(deps, org, task.id, 20),
    unattendedSection(deps, viewer, task),
    taskSlotSections(deps, org, task),
  ]);
  const tz = task.timezone ?? 'UTC';
  const model = deps.models.find(task.model);
  const skillById = new Map(skills.map((s) => [s.id, s]));
  const sourceById = new Map(sources.map((s) => [s.id, s]));
  const nextStatus = task.status === 'active' ? 'paused' : 'active';
  return page(
    { title: task.name, viewer, section: '/dashboard/tasks', flash },
    html`<h1>${task.name} ${badge(task.status)}</h1>
<div class="row spaced">
  ${runNowButton(viewer, task)}
  <form method="post" action="/dashboard/tasks/${task.id}/status" class="inline">${csrfField(viewer.csrfToken)}
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
  ${runCheckRows(task)}
</tbody></table></div>
${unattended}
<h2>Prompt</h2>
<div class="output pre-wrap">${task.prompt}</div>
${slots}
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
    html`<div class="row ends"><h1>Tasks</h1><a class="button" href="/dashboard/tasks/new">New task</a></div>
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
    const viewer = viewerOf(request);
    return sendHtml(reply, 200, await taskListPage(deps, viewer, doneFlash(request.query, TASK_DONE)));
  });

  scope.get(`${section}/new`, async (request, reply) => {
    const viewer = viewerOf(request);
    const values = newTaskValues(deps);
    const preview = schedulePreview(values, deps.clock.now());
    return sendHtml(reply, 200, await taskFormPage(deps, viewer, { values, preview }));
  });

  scope.post(section, async (request, reply) => {
    const viewer = viewerOf(request);
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
    const invalidBody = withRunCheckProblems(schemaProblems(TaskCreateBody, body), values.checks);
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
    const viewer = viewerOf(request);
    const task = await taskOf(viewer, request.params.id);
    if (!task) return missing(reply, viewer);
    return sendHtml(reply, 200, await taskPage(deps, viewer, task, doneFlash(request.query, TASK_DONE)));
  });

  scope.get<IdParams>(`${section}/:id/edit`, async (request, reply) => {
    const viewer = viewerOf(request);
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
    const viewer = viewerOf(request);
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
    const invalidBody = withRunCheckProblems(schemaProblems(TaskUpdateBody, patch), values.checks);
    if (invalidBody) return again(withDetails(invalidBody, scheduleProblems(values)));
    try {
      await updateOrganizationTask(deps, viewer.organizationId, task.id, patch as TaskUpdateBody);
      return reply.redirect(`${section}/${task.id}?done=saved`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (err.code === 'not_found') return missing(reply, viewer);
      return again(err);
    }
  });

  scope.post<IdParams>(`${section}/:id/run`, async (request, reply) => {
    const viewer = viewerOf(request);
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
    const viewer = viewerOf(request);
    const task = await taskOf(viewer, request.params.id);
    if (!task) return missing(reply, viewer);
    const patch = { status: field(formOf(request), 'status') };
    try {
      const invalidBody = schemaProblems(TaskUpdateBody, patch);
      if (invalidBody) throw invalidBody;
      const saved = await updateOrganizationTask(
        deps,
        viewer.organizationId,
        task.id,
        patch as TaskUpdateBody,
      );
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

  deleteRoutes(scope, {
    section,
    noun: 'task',
    load: taskOf,
    remove: (viewer, id) => deleteOrganizationTask(deps, viewer.organizationId, id),
    consequence: (task) =>
      html`The task <strong>${task.name}</strong>, its destinations and all its runs will be deleted. Usage it produced stays counted.`,
    missing,
  });
}

/**
 * Fragments fetched by the task form's script; their session scope answers a bare 401 when
 * signed out (see sessionScope in auth.ts).
 */
export function scheduleFragments(scope: WebScope, deps: Deps): void {
  scope.get('/dashboard/schedule-preview', async (request, reply) => {
    const fragment = schedulePreview(scheduleInputOf(request.query as FormBody), deps.clock.now());
    return sendHtml(reply, 200, fragment.value);
  });
}
