// The task form's run checks (cost cap per run, output schema, required tools) and their rows
// on the task page. The schema is typed as JSON in a textarea: text that is not a JSON object
// is refused here with the form shown again, before the API's own checks.
import type { AppError } from '../../lib/errors.ts';
import { errors } from '../../lib/errors.ts';
import type { Task } from '../../schemas/task.ts';
import { type FormBody, field } from '../auth.ts';
import { type Html, html } from '../html.ts';
import { invalid, withDetails } from '../page-kit.ts';

/** The form's three fields, as typed. */
export interface RunCheckValues {
  maxCost: string;
  outputSchema: string;
  requiredTools: string;
}

export const RUN_CHECK_LABELS: Record<string, string> = {
  maxCostCentsPerRun: 'Max cost per run',
  outputSchema: 'Output schema',
  requiredTools: 'Required tools',
};

export const NO_RUN_CHECKS: RunCheckValues = { maxCost: '', outputSchema: '', requiredTools: '' };

const schemaText = (schema: unknown) => JSON.stringify(schema, null, 2);

export function runCheckValuesOfTask(task: Task): RunCheckValues {
  return {
    maxCost: task.maxCostCentsPerRun === undefined ? '' : String(task.maxCostCentsPerRun),
    outputSchema: task.outputSchema === undefined ? '' : schemaText(task.outputSchema),
    requiredTools: (task.requiredTools ?? []).join(', '),
  };
}

export function runCheckValuesOfForm(form: FormBody): RunCheckValues {
  return {
    maxCost: field(form, 'maxCostCentsPerRun'),
    outputSchema: field(form, 'outputSchema'),
    requiredTools: field(form, 'requiredTools'),
  };
}

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

function parseCost(text: string): Parsed<number | null> {
  if (text === '') return { ok: true, value: null };
  if (!/^\d+(\.\d+)?$/.test(text)) return { ok: false, message: 'must be a number of cents, e.g. 25 or 2.5' };
  return { ok: true, value: Number(text) };
}

function parseSchema(text: string): Parsed<Record<string, unknown> | null> {
  if (text === '') return { ok: true, value: null };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, message: `is not valid JSON (${(err as Error).message.slice(0, 200)})` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return { ok: false, message: 'must be a JSON object (a JSON Schema)' };
  return { ok: true, value: value as Record<string, unknown> };
}

const toolList = (text: string) => text.split(/[\s,]+/).filter(Boolean);

/** The create body's fields for what the form holds (fields that do not parse are left out). */
export function runCheckCreateFields(v: RunCheckValues): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const cost = parseCost(v.maxCost);
  if (cost.ok && cost.value !== null) body.maxCostCentsPerRun = cost.value;
  const schema = parseSchema(v.outputSchema);
  if (schema.ok && schema.value !== null) body.outputSchema = schema.value;
  const tools = toolList(v.requiredTools);
  if (tools.length > 0) body.requiredTools = tools;
  return body;
}

/**
 * The PATCH fields for what changed: an emptied field clears its check; the schema is sent only
 * when it differs from the saved one (each one sent is compiled again).
 */
export function runCheckPatchFields(v: RunCheckValues, task: Task): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  const cost = parseCost(v.maxCost);
  if (cost.ok && cost.value !== (task.maxCostCentsPerRun ?? null)) patch.maxCostCentsPerRun = cost.value;
  const schema = parseSchema(v.outputSchema);
  if (schema.ok && JSON.stringify(schema.value) !== JSON.stringify(task.outputSchema ?? null))
    patch.outputSchema = schema.value;
  const tools = toolList(v.requiredTools);
  if (tools.join(',') !== (task.requiredTools ?? []).join(','))
    patch.requiredTools = tools.length > 0 ? tools : null;
  return patch;
}

/** The schema check's error with the form's own problems added (or those alone). */
export function withRunCheckProblems(err: AppError | undefined, v: RunCheckValues): AppError | undefined {
  const details = [];
  const cost = parseCost(v.maxCost);
  if (!cost.ok) details.push({ path: '/body/maxCostCentsPerRun', message: cost.message });
  const schema = parseSchema(v.outputSchema);
  if (!schema.ok) details.push({ path: '/body/outputSchema', message: schema.message });
  if (details.length === 0) return err;
  const first = details[0];
  return withDetails(err ?? errors.validation(`${first?.path} ${first?.message}`), details);
}

export function runCheckFieldset(v: RunCheckValues, err: AppError | undefined): Html {
  return html`<fieldset><legend>Run checks</legend>
    <p class="muted">A run that fails one of these ends failed; its output is kept.</p>
    <div><label for="maxCostCentsPerRun">Max cost per run (cents)</label><input id="maxCostCentsPerRun" name="maxCostCentsPerRun" inputmode="decimal" value="${v.maxCost}" aria-describedby="maxCost-help" ${invalid(err, 'maxCostCentsPerRun')}>
      <p class="muted" id="maxCost-help">Empty: no cap. The run stops once its cost reaches the cap; 0 makes no model call.</p></div>
    <div><label for="outputSchema">Output schema (JSON Schema)</label><textarea id="outputSchema" name="outputSchema" rows="6" spellcheck="false" aria-describedby="outputSchema-help" ${invalid(err, 'outputSchema')}>${v.outputSchema}</textarea>
      <p class="muted" id="outputSchema-help">Empty: any output. Otherwise the final output must be JSON that matches it (at most 64 KiB, only references within it).</p></div>
    <div><label for="requiredTools">Required tools</label><input id="requiredTools" name="requiredTools" spellcheck="false" value="${v.requiredTools}" aria-describedby="requiredTools-help" ${invalid(err, 'requiredTools')}>
      <p class="muted" id="requiredTools-help">Tools the model must call in every run, separated by commas: as offered (<code>source-slug__tool</code>) or the tool's own name.</p></div>
  </fieldset>`;
}

const none = html`<span class="muted">none</span>`;

/** The task page's rows for the checks. */
export function runCheckRows(task: Task): Html {
  return html`<tr><th scope="row">Max cost per run</th><td>${task.maxCostCentsPerRun === undefined ? none : `${task.maxCostCentsPerRun} cents`}</td></tr>
  <tr><th scope="row">Output schema</th><td>${task.outputSchema === undefined ? none : html`<pre class="output" id="output-schema">${schemaText(task.outputSchema)}</pre>`}</td></tr>
  <tr><th scope="row">Required tools</th><td>${task.requiredTools?.length ? task.requiredTools.map((t, i) => html`${i ? ', ' : ''}<code>${t}</code>`) : none}</td></tr>`;
}
