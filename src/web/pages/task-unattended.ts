// The task form's and the task page's part on unattended runs: after how many failed runs in a
// row the task pauses itself, which runs are delivered (always, on change, on failure), and on
// the task page why it paused, its failed runs in a row and the notices sent to its destinations.
import type { Deps } from '../../domain/deps.ts';
import { listTaskNotices, NOTICES_SHOWN } from '../../domain/task-notices.ts';
import type { Viewer } from '../../domain/users.ts';
import type { AppError } from '../../lib/errors.ts';
import { DELIVER_ON, type Task } from '../../schemas/task.ts';
import { type FormBody, field } from '../auth.ts';
import { type Html, html, raw } from '../html.ts';
import { badge } from '../layout.ts';
import { invalid, when } from '../page-kit.ts';

export interface UnattendedValues {
  /** As typed: checked by the API's schema (an integer 0–100). */
  autoPauseAfterFailures: string;
  deliverOn: string;
}

const DELIVER_ON_LABELS: Record<(typeof DELIVER_ON)[number], string> = {
  always: 'Every run',
  change: 'Only when the output changed (and every failure)',
  failure: 'Only failed runs',
};

export const unattendedValuesOfTask = (task: Task): UnattendedValues => ({
  autoPauseAfterFailures: String(task.autoPauseAfterFailures ?? 5),
  deliverOn: task.deliverOn ?? 'always',
});

export const newUnattendedValues = (): UnattendedValues => ({
  autoPauseAfterFailures: '5',
  deliverOn: 'always',
});

export const unattendedValuesOfForm = (form: FormBody): UnattendedValues => ({
  autoPauseAfterFailures: field(form, 'autoPauseAfterFailures').trim(),
  deliverOn: field(form, 'deliverOn'),
});

/**
 * The API fields of the form's values: a number typed as digits is sent as a number, anything
 * else as typed, so that the schema names the problem. A field left out of the form is left
 * out of the body (the task's value, or the default, stays).
 */
export function unattendedBody(v: UnattendedValues): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const n = v.autoPauseAfterFailures;
  if (n !== '') body.autoPauseAfterFailures = /^\d{1,4}$/.test(n) ? Number(n) : n;
  if (v.deliverOn !== '') body.deliverOn = v.deliverOn;
  return body;
}

/** Only what changed, so that saving the form leaves a task's failure count alone. */
export function unattendedPatch(v: UnattendedValues, task: Task): Record<string, unknown> {
  const body = unattendedBody(v);
  if (body.autoPauseAfterFailures === task.autoPauseAfterFailures) delete body.autoPauseAfterFailures;
  if (body.deliverOn === task.deliverOn) delete body.deliverOn;
  return body;
}

/** The form's fieldset. */
export function unattendedFieldset(v: UnattendedValues, err: AppError | undefined): Html {
  return html`<fieldset id="unattended"><legend>Failures and delivery</legend>
    <div><label for="autoPauseAfterFailures">Pause after this many failed runs in a row</label>
      <input id="autoPauseAfterFailures" name="autoPauseAfterFailures" type="number" min="0" max="100" step="1" value="${v.autoPauseAfterFailures}" aria-describedby="autoPause-help" ${invalid(err, 'autoPauseAfterFailures')}>
      <p class="muted" id="autoPause-help">0 never pauses. A paused task's destinations are told once; resuming it starts the count afresh.</p></div>
    <fieldset ${invalid(err, 'deliverOn')}><legend>Send to the destinations</legend>${DELIVER_ON.map(
      (d) =>
        html`<label class="choice"><input type="radio" name="deliverOn" value="${d}" ${v.deliverOn === d ? raw('checked') : ''}> ${DELIVER_ON_LABELS[d]}</label>`,
    )}</fieldset>
  </fieldset>`;
}

/** The task page's section: why it paused, its failed runs in a row, its settings and notices. */
export async function unattendedSection(deps: Deps, viewer: Viewer, task: Task): Promise<Html> {
  const notices = await listTaskNotices(deps, viewer.organizationId, task.id);
  const tz = task.timezone ?? 'UTC';
  const limit = task.autoPauseAfterFailures ?? 5;
  return html`<section id="unattended-runs">
${task.pausedReason ? html`<div class="flash error" role="status" id="paused-reason">${task.pausedReason}. Resume the task to run it again.</div>` : ''}
<h2>Failures and delivery</h2>
<div class="table-wrap"><table><tbody>
  <tr><th scope="row">Failed runs in a row</th><td id="consecutive-failures">${task.consecutiveFailures ?? 0}</td></tr>
  <tr><th scope="row">Pauses after</th><td>${limit === 0 ? 'never' : `${limit} failed runs in a row`}</td></tr>
  <tr><th scope="row">Sends</th><td>${DELIVER_ON_LABELS[task.deliverOn ?? 'always']}</td></tr>
</tbody></table></div>
<h2>Notices</h2>
${
  notices.length === 0
    ? html`<p class="muted">No notice has been sent to this task's destinations.</p>`
    : html`<div class="table-wrap"><table id="task-notices">
<thead><tr><th scope="col">Queued</th><th scope="col">Notice</th><th scope="col">Destination</th><th scope="col">Status</th><th scope="col">Attempts</th></tr></thead>
<tbody>${notices.map(
        (n) => html`<tr><td>${when(n.queuedAt, tz)}</td><td><code>${n.kind}</code> ${n.summary}</td>
<td>${n.channel}: ${n.target}${n.label ? html` <span class="muted">(${n.label})</span>` : ''}</td>
<td>${badge(n.status === 'sending' ? 'pending' : n.status)}${n.error ? html` <span class="muted">${n.error}</span>` : ''}</td><td>${n.attempts}</td></tr>`,
      )}</tbody></table></div>
${notices.length === NOTICES_SHOWN ? html`<p class="muted">The newest ${NOTICES_SHOWN} are shown.</p>` : ''}`
}
</section>`;
}
