// What every dashboard page module shares: turning a form into the API's request body and
// checking it with the API's own schemas (the same Ajv options as the JSON API's body
// validator, and the same error details), problem lists, time and money formatting, the
// not-found and confirmation pages, and the runs table.

import type { ErrorObject, ValidateFunction } from 'ajv';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TSchema } from 'typebox';
import type { CatalogModel } from '../domain/models.ts';
import type { Viewer } from '../domain/users.ts';
import { newAjv } from '../lib/ajv.ts';
import { AppError, type ErrorDetail } from '../lib/errors.ts';
import { isUuid } from '../lib/ids.ts';
import { validationError } from '../lib/validation-error.ts';
import { isValidTimezone } from '../schedule/slots.ts';
import type { Run } from '../schemas/run.ts';
import type { Task } from '../schemas/task.ts';
import { viewerOf } from './auth.ts';
import { type Html, html, raw } from './html.ts';
import { badge, csrfField, page } from './layout.ts';

export type Flash = { kind: 'ok' | 'error'; text: string } | undefined;

export function sendHtml(reply: FastifyReply, status: number, markup: string) {
  return reply.code(status).type('text/html; charset=utf-8').send(markup);
}

// Ids in paths are checked before they reach SQL (isUuid): anything else is simply not found.
export { isUuid };

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

/**
 * The two routes that delete a resource: `GET <section>/:id/delete` asks (a page with a form, so
 * no script is needed) and `POST <section>/:id/delete` deletes and goes back to the list. An id
 * that is not a uuid or not the organization's is not found, like an unknown one.
 */
export function deleteRoutes<T extends { id?: string; name: string }>(
  scope: FastifyInstance,
  o: {
    section: string;
    /** The resource's name in the button, e.g. `skill`. */
    noun: string;
    load(viewer: Viewer, id: string): Promise<T | undefined>;
    remove(viewer: Viewer, id: string): Promise<unknown>;
    /** What deleting it does, shown on the confirmation page. */
    consequence(item: T): Html;
    missing(reply: FastifyReply, viewer: Viewer): FastifyReply;
  },
): void {
  type IdParams = { Params: { id: string } };
  scope.get<IdParams>(`${o.section}/:id/delete`, async (request, reply) => {
    const viewer = viewerOf(request);
    const item = await o.load(viewer, request.params.id);
    if (!item) return o.missing(reply, viewer);
    return sendHtml(
      reply,
      200,
      confirmPage(viewer, {
        section: o.section,
        title: `Delete ${item.name}?`,
        question: html`${o.consequence(item)} This cannot be undone.`,
        action: `${o.section}/${item.id}/delete`,
        cancel: `${o.section}/${item.id}`,
        button: `Delete ${o.noun}`,
      }),
    );
  });
  scope.post<IdParams>(`${o.section}/:id/delete`, async (request, reply) => {
    const viewer = viewerOf(request);
    const id = request.params.id;
    if (!isUuid(id)) return o.missing(reply, viewer);
    const deleted = await found(() => o.remove(viewer, id).then(() => true));
    if (!deleted) return o.missing(reply, viewer);
    return reply.redirect(`${o.section}?done=deleted`, 303);
  });
}

// The JSON API's body validator's setup (src/http/plugins/validation.ts): exact types.
const bodyAjv = newAjv('json');
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
  return validationError('body', issues);
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

/**
 * The catalog's models as options grouped by provider, `selected` marked, each labelled with its
 * name and what `note` adds (a select of the task form, of a replay).
 */
export function catalogModelOptions(
  models: readonly CatalogModel[],
  selected: CatalogModel | undefined,
  note: (m: CatalogModel) => string,
): Html {
  const providers = [...new Set(models.map((m) => m.provider))];
  return html`${providers.map(
    (p) =>
      html`<optgroup label="${p}">${models
        .filter((m) => m.provider === p)
        .map(
          (m) =>
            html`<option value="${m.routerModelId}" ${selected?.id === m.id ? raw('selected') : ''}>${m.name}${note(m)}</option>`,
        )}</optgroup>`,
  )}`;
}
