// The task page's slot timeline (what became of each recent slot) and upcoming slots (local
// times and DST notes), and the task form's monthly cost limit field.
import type { Deps } from '../../domain/deps.ts';
import { taskSlotRecords, taskUpcomingSlots } from '../../domain/slot-records.ts';
import type { AppError } from '../../lib/errors.ts';
import type { Task } from '../../schemas/task.ts';
import { type Html, html } from '../html.ts';
import { invalid, when } from '../page-kit.ts';

const OUTCOME_WORDS: Record<string, string> = {
  ran: 'ran',
  skipped_overlap: 'skipped: previous run still going',
  missed: 'missed',
  skipped_budget: 'skipped: cost limit',
  skipped_run_limit: 'skipped: plan run limit',
};

/** Slots shown on the task page: the newest records and the next slots. */
const TIMELINE_ROWS = 20;
const UPCOMING_ROWS = 5;

/** The task page's "Slots" and "Upcoming" sections. */
export async function taskSlotSections(deps: Deps, organizationId: string, task: Task): Promise<Html> {
  const tz = task.timezone ?? 'UTC';
  const [records, upcoming] = await Promise.all([
    taskSlotRecords(deps, organizationId, task.id, TIMELINE_ROWS),
    taskUpcomingSlots(deps, organizationId, task.id, UPCOMING_ROWS),
  ]);
  const timeline = records.length
    ? html`<div class="table-wrap"><table id="slot-timeline">
<thead><tr><th scope="col">Slot</th><th scope="col">Outcome</th><th scope="col">Run</th><th scope="col">Why</th></tr></thead>
<tbody>${records.map(
        (
          r,
        ) => html`<tr data-outcome="${r.outcome}"><td>${when(r.slotAt, tz)}${r.slots ? html` <span class="muted">and ${r.slots - 1} more</span>` : ''}</td>
<td>${OUTCOME_WORDS[r.outcome] ?? r.outcome}</td>
<td>${r.runId ? html`<a href="/dashboard/runs/${r.runId}">view run</a>` : html`<span class="muted">none</span>`}</td>
<td>${r.reason ?? ''}</td></tr>`,
      )}</tbody></table></div>`
    : html`<p class="muted">No slot has come yet.</p>`;
  const next = upcoming.length
    ? html`<ul id="upcoming-slots">${upcoming.map(
        (u) =>
          html`<li><time datetime="${u.at}">${u.localTime}</time> <span class="muted">(${u.at})</span>${u.note ? html`<br><span class="muted">${u.note}</span>` : ''}</li>`,
      )}</ul>`
    : html`<p class="muted">No upcoming slots${task.status === 'active' ? '' : ` while the task is ${task.status}`}.</p>`;
  return html`<h2>Slots</h2>
<p class="muted">What became of each recent schedule slot, newest first.</p>
${timeline}
<h2>Upcoming</h2>
${next}`;
}

/** The form's value for the limit: cents as typed, empty for none. */
export const costLimitValue = (task: Task | undefined): string =>
  task?.monthlyCostLimitCents === undefined ? '' : String(task.monthlyCostLimitCents);

/** The typed limit as the API takes it: a number when it reads as one (else as typed, for the schema to refuse). */
function costLimitOf(text: string): number | string | null {
  if (text === '') return null;
  return /^\d+(\.\d+)?$/.test(text) ? Number(text) : text;
}

/** The create body's field: present only when a limit was typed. */
export function costLimitCreate(text: string): Record<string, unknown> {
  const v = costLimitOf(text);
  return v === null ? {} : { monthlyCostLimitCents: v };
}

/** The PATCH's field: only when it changed; an emptied field clears the limit. */
export function costLimitPatch(text: string, task: Task): Record<string, unknown> {
  return text === costLimitValue(task) ? {} : { monthlyCostLimitCents: costLimitOf(text) };
}

export function costLimitField(value: string, err: AppError | undefined): Html {
  return html`<div><label for="monthlyCostLimitCents">Monthly cost limit (cents)</label><input id="monthlyCostLimitCents" name="monthlyCostLimitCents" inputmode="decimal" value="${value}" aria-describedby="cost-limit-help" ${invalid(err, 'monthlyCostLimitCents')}>
  <p class="muted" id="cost-limit-help">Empty: no limit. Once the task's cost in the billing period reaches it, its scheduled slots are skipped and Run now is refused until the next period.</p></div>`;
}
