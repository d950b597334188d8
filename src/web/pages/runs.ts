// Runs: the organization's recent runs, and one run with its output, error and deliveries
// (each with its attempts), a retry of failed deliveries, and a page that reloads itself while
// the run (or its delivery) is still going.
import type { FastifyReply } from 'fastify';
import type { Deps } from '../../domain/deps.ts';
import { getRun, listRuns, redeliverRun } from '../../domain/runs.ts';
import { getTask, listOrganizationTasks } from '../../domain/tasks.ts';
import type { Viewer } from '../../domain/users.ts';
import { AppError } from '../../lib/errors.ts';
import type { Delivery, RunWithDeliveries } from '../../schemas/run.ts';
import type { Task } from '../../schemas/task.ts';
import { viewerOf } from '../auth.ts';
import { type Html, html } from '../html.ts';
import { badge, csrfField, page } from '../layout.ts';
import { renderMarkdown } from '../markdown.ts';
import {
  doneFlash,
  type Flash,
  formatCost,
  formatCount,
  formatDuration,
  found,
  isUuid,
  notFoundPage,
  runsTable,
  sendHtml,
  when,
} from '../page-kit.ts';
import type { WebScope } from '../plugin.ts';
import { replayComparison, runControlRoutes, runControls, runOrigin } from './run-control.ts';

const section = '/dashboard/runs';
const LIMITS = [20, 50, 100] as const;

/** `?limit=`: 1 to 100, default 20 (a larger value is taken as 100). */
function limitOf(query: unknown): number {
  const raw = (query as { limit?: unknown } | undefined)?.limit;
  const n = typeof raw === 'string' ? Number.parseInt(raw, 10) : Number.NaN;
  if (!Number.isFinite(n) || n < 1) return 20;
  return Math.min(n, 100);
}

/** Whether anything on the page may still change by itself. */
function stillGoing(run: RunWithDeliveries): boolean {
  return (
    run.status === 'pending' ||
    run.status === 'running' ||
    run.deliveryStatus === 'pending' ||
    (run.deliveries ?? []).some((d) => d.status === 'pending' || d.status === 'sending')
  );
}

function deliverySection(d: Delivery, tz: string): Html {
  return html`<section class="gap-below">
<h3>${d.type}: ${d.value}${d.label ? html` <span class="muted">(${d.label})</span>` : ''} ${badge(d.status === 'sending' ? 'pending' : d.status)}</h3>
${d.status === 'sending' ? html`<p class="muted">An attempt is in progress.</p>` : ''}
${d.nextAttemptAt ? html`<p class="muted">Next attempt: ${when(d.nextAttemptAt, tz)}</p>` : ''}
${d.deliveredAt ? html`<p class="muted">Delivered: ${when(d.deliveredAt, tz)}</p>` : ''}
${d.error ? html`<p class="flash error">${d.error}</p>` : ''}
${
  d.status === 'suppressed'
    ? html`<p class="muted">Not sent: the task sends only changed outputs or only failures (its deliverOn), and this run was neither.</p>`
    : d.attempts.length === 0
      ? html`<p class="muted">No attempt yet.</p>`
      : html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Attempt</th><th scope="col">Time</th><th scope="col">Outcome</th><th scope="col">Status code</th><th scope="col">Error or response</th></tr></thead>
<tbody>${d.attempts.map(
          (
            a,
          ) => html`<tr><td>${a.attempt}</td><td>${when(a.at, tz)} <span class="muted">(${formatDuration(a.durationMs)})</span></td>
<td>${badge(a.outcome)}</td><td>${a.statusCode ?? '—'}</td>
<td>${a.error ? html`<div>${a.error}</div>` : ''}${a.response ? html`<pre class="pre-wrap">${a.response}</pre>` : ''}${!a.error && !a.response ? '—' : ''}</td></tr>`,
        )}</tbody></table></div>`
}
</section>`;
}

function runPage(
  deps: Deps,
  viewer: Viewer,
  run: RunWithDeliveries,
  task: Task | undefined,
  flash: Flash,
  original?: RunWithDeliveries,
): string {
  const tz = task?.timezone ?? 'UTC';
  const deliveries = run.deliveries ?? [];
  const anyFailed = deliveries.some((d) => d.status === 'failed');
  const going = stillGoing(run);
  return page(
    {
      title: `Run of ${task?.name ?? 'a task'}`,
      viewer,
      section,
      flash,
      ...(going && { refreshSeconds: 2 }),
    },
    html`<h1>Run of ${task ? html`<a href="/dashboard/tasks/${task.id}">${task.name}</a>` : 'a deleted task'} ${badge(run.status)}</h1>
${going ? html`<p class="muted" role="status">This page updates itself every 2 seconds while the run or its delivery is in progress.</p>` : ''}
${runOrigin(run, tz)}
${runControls(deps, viewer, run, task)}
<div class="cards">
  <div class="card"><div class="muted">Duration</div><div class="n">${formatDuration(run.durationMs)}</div></div>
  <div class="card"><div class="muted">Tokens</div><div class="n">${formatCount(run.tokensUsed)}</div></div>
  <div class="card"><div class="muted">Cost</div><div class="n">${formatCost(run.costCents)}</div></div>
  <div class="card"><div class="muted">Delivery</div><div class="n">${run.deliveryStatus ? badge(run.deliveryStatus) : html`<span class="muted">none</span>`}</div></div>
</div>
<div class="table-wrap"><table><tbody>
  <tr><th scope="row">Created</th><td>${when(run.createdAt, tz)}</td></tr>
  <tr><th scope="row">Started</th><td>${when(run.startedAt, tz)}</td></tr>
  <tr><th scope="row">Completed</th><td>${when(run.completedAt, tz)}</td></tr>
  <tr><th scope="row">Run id</th><td><code>${run.id ?? ''}</code></td></tr>
</tbody></table></div>
${run.error ? html`<h2>Error</h2><div class="flash error" role="alert">${run.error}</div>` : ''}
${run.replayOf ? replayComparison(run, original) : ''}
<h2>Output</h2>
${
  run.output?.trim()
    ? html`<div class="output">${renderMarkdown(run.output)}</div>`
    : html`<p class="muted">${run.status === 'pending' || run.status === 'running' ? 'No output yet.' : 'The run has no output.'}</p>`
}
<h2>Deliveries</h2>
${
  deliveries.length === 0
    ? html`<p class="muted">The task had no destination when the run ended.</p>`
    : html`${anyFailed ? html`<form method="post" action="${section}/${run.id ?? ''}/redeliver" class="gap-below">${csrfField(viewer.csrfToken)}<button type="submit">Retry failed deliveries</button></form>` : ''}
${deliveries.map((d) => deliverySection(d, tz))}`
}`,
  );
}

export function runPages(scope: WebScope, deps: Deps): void {
  const missing = (reply: FastifyReply, viewer: Viewer) =>
    notFoundPage(reply, viewer, section, 'Run', { href: section, label: 'Back to runs' });
  const runOf = (viewer: Viewer, id: string) =>
    isUuid(id) ? found(() => getRun(deps, viewer.organizationId, id)) : Promise.resolve(undefined);
  const taskOfRun = (viewer: Viewer, run: RunWithDeliveries) =>
    run.taskId
      ? found(() => getTask(deps, viewer.organizationId, run.taskId ?? ''))
      : Promise.resolve(undefined);

  scope.get(section, async (request, reply) => {
    const viewer = viewerOf(request);
    const limit = limitOf(request.query);
    const [runs, tasks] = await Promise.all([
      listRuns(deps, viewer.organizationId, limit),
      listOrganizationTasks(deps, viewer.organizationId),
    ]);
    const byId = new Map(tasks.map((t) => [t.id, t]));
    return sendHtml(
      reply,
      200,
      page(
        { title: 'Runs', viewer, section },
        html`<h1>Runs</h1>
<p class="muted">The ${limit} newest runs of every task. Show
${LIMITS.map((n, i) => html`${i ? ', ' : ''}${n === limit ? html`<strong>${n}</strong>` : html`<a href="${section}?limit=${n}">${n}</a>`}`)}.</p>
${runsTable(runs, { tasks: byId })}`,
      ),
    );
  });

  /** The run page, with the run a replay replays beside it. */
  const showRun = async (reply: FastifyReply, viewer: Viewer, id: string, flash: Flash, status = 200) => {
    const run = await runOf(viewer, id);
    if (!run) return missing(reply, viewer);
    const [task, original] = await Promise.all([
      taskOfRun(viewer, run),
      run.replayOf ? runOf(viewer, run.replayOf) : undefined,
    ]);
    return sendHtml(reply, status, runPage(deps, viewer, run, task, flash, original));
  };

  scope.get<{ Params: { id: string } }>(`${section}/:id`, async (request, reply) => {
    const viewer = viewerOf(request);
    const flash = doneFlash(request.query, {
      redelivered: 'The failed deliveries are queued again.',
      canceled: 'The run was canceled.',
    });
    return showRun(reply, viewer, request.params.id, flash);
  });

  runControlRoutes(scope, deps, showRun, missing);

  scope.post<{ Params: { id: string } }>(`${section}/:id/redeliver`, async (request, reply) => {
    const viewer = viewerOf(request);
    const id = request.params.id;
    if (!isUuid(id)) return missing(reply, viewer);
    try {
      await redeliverRun(deps, viewer.organizationId, id);
      return reply.redirect(`${section}/${id}?done=redelivered`, 303);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (err.code === 'not_found') return missing(reply, viewer);
      const run = await runOf(viewer, id);
      if (!run) return missing(reply, viewer);
      const task = await taskOfRun(viewer, run);
      return sendHtml(
        reply,
        err.status,
        runPage(deps, viewer, run, task, { kind: 'error', text: err.message }),
      );
    }
  });
}
