// Cancel and replay on a run's page: a Cancel button while the run is pending or running, a
// Replay form with a choice of the catalog's models (the task's chosen), and, on a replay's
// page, the replay beside the run it replays (output, tokens, cost, duration).
import type { FastifyReply } from 'fastify';
import type { Deps } from '../../domain/deps.ts';
import { cancelRun, replayRun } from '../../domain/run-control.ts';
import type { Viewer } from '../../domain/users.ts';
import { AppError } from '../../lib/errors.ts';
import { ReplayBody, type Run } from '../../schemas/run.ts';
import type { Task } from '../../schemas/task.ts';
import { field, formOf, viewerOf } from '../auth.ts';
import { type Html, html } from '../html.ts';
import { badge, csrfField } from '../layout.ts';
import { renderMarkdown } from '../markdown.ts';
import {
  catalogModelOptions,
  type Flash,
  formatCost,
  formatCount,
  formatDuration,
  isUuid,
  schemaProblems,
  when,
} from '../page-kit.ts';
import type { WebScope } from '../plugin.ts';

const section = '/dashboard/runs';

/** The models a replay may use, grouped by provider, `chosen` (a task's model) selected. */
function replayModelSelect(deps: Deps, chosen: string): Html {
  const selected = deps.models.find(chosen) ?? deps.models.defaultModel;
  return html`<select id="replay-model" name="model">
${catalogModelOptions(deps.models.list(), selected, (m) => (m.id === selected.id ? " (the task's)" : ''))}
</select>`;
}

/** Cancel (pending or running) and Replay (the task still exists) for the run page. */
export function runControls(deps: Deps, viewer: Viewer, run: Run, task: Task | undefined): Html {
  const id = run.id ?? '';
  const going = run.status === 'pending' || run.status === 'running';
  return html`<div class="row gap-below">
${going ? html`<form method="post" action="${section}/${id}/cancel" class="inline">${csrfField(viewer.csrfToken)}<button type="submit" class="danger">Cancel run</button></form>` : ''}
${
  task
    ? html`<form method="post" action="${section}/${id}/replay" class="inline">${csrfField(viewer.csrfToken)}
<label for="replay-model">Replay with</label> ${replayModelSelect(deps, task.model)} <button type="submit" class="secondary">Replay</button></form>`
    : ''
}
</div>`;
}

/** What a run page says of a run that was canceled or replays another, in the task's zone. */
export function runOrigin(run: Run, timeZone: string): Html {
  return html`${run.canceledAt ? html`<p class="muted">Canceled ${when(run.canceledAt, timeZone)}.</p>` : ''}
${run.replayOf ? html`<p class="muted">A replay of <a href="${section}/${run.replayOf}">an earlier run</a>${run.scheduledFor ? html`, with the time context of its slot ${when(run.scheduledFor, timeZone)}` : ', with the time context of its creation'}.</p>` : ''}`;
}

/** The replay beside the run it replays. */
export function replayComparison(replay: Run, original: Run | undefined): Html {
  if (!original) return html`<p class="muted">The replayed run no longer exists.</p>`;
  const cell = (r: Run) => ({
    output: r.output?.trim()
      ? html`<div class="output">${renderMarkdown(r.output)}</div>`
      : html`<span class="muted">${r.error ?? 'No output yet.'}</span>`,
  });
  const rows: [string, (r: Run) => Html | string][] = [
    ['Status', (r) => badge(r.status)],
    ['Model', (r) => r.model ?? html`<span class="muted">the task's at the time</span>`],
    ['Tokens', (r) => formatCount(r.tokensUsed)],
    ['Cost', (r) => formatCost(r.costCents)],
    ['Duration', (r) => formatDuration(r.durationMs)],
    ['Output', (r) => cell(r).output],
  ];
  return html`<h2>Replay and original</h2>
<div class="table-wrap"><table class="comparison">
<thead><tr><th scope="col"></th><th scope="col">This replay</th><th scope="col"><a href="${section}/${original.id ?? ''}">Original run</a></th></tr></thead>
<tbody>${rows.map(([label, value]) => html`<tr><th scope="row">${label}</th><td data-run="replay">${value(replay)}</td><td data-run="original">${value(original)}</td></tr>`)}</tbody>
</table></div>`;
}

/**
 * POST /dashboard/runs/:id/cancel and /replay. `showRun` renders the run page with a message
 * (a refusal, with its status).
 */
export function runControlRoutes(
  scope: WebScope,
  deps: Deps,
  showRun: (
    reply: FastifyReply,
    viewer: Viewer,
    id: string,
    flash: Flash,
    status: number,
  ) => Promise<unknown>,
  missing: (reply: FastifyReply, viewer: Viewer) => unknown,
): void {
  const refused = async (reply: FastifyReply, viewer: Viewer, id: string, err: unknown) => {
    if (!(err instanceof AppError)) throw err;
    if (err.code === 'not_found') return missing(reply, viewer);
    return showRun(reply, viewer, id, { kind: 'error', text: err.message }, err.status);
  };

  scope.post<{ Params: { id: string } }>(`${section}/:id/cancel`, async (request, reply) => {
    const viewer = viewerOf(request);
    const id = request.params.id;
    if (!isUuid(id)) return missing(reply, viewer);
    try {
      await cancelRun(deps, viewer.organizationId, id);
      return reply.redirect(`${section}/${id}?done=canceled`, 303);
    } catch (err) {
      return refused(reply, viewer, id, err);
    }
  });

  scope.post<{ Params: { id: string } }>(`${section}/:id/replay`, async (request, reply) => {
    const viewer = viewerOf(request);
    const id = request.params.id;
    if (!isUuid(id)) return missing(reply, viewer);
    const model = field(formOf(request), 'model');
    const body = model ? { model } : {};
    try {
      const invalidBody = schemaProblems(ReplayBody, body);
      if (invalidBody) throw invalidBody;
      const replay = await replayRun(deps, viewer.organizationId, id, body);
      return reply.redirect(`${section}/${replay.id ?? ''}`, 303);
    } catch (err) {
      return refused(reply, viewer, id, err);
    }
  });
}
