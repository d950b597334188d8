import type { LimitOverrides, Plan } from './plan-types.ts';
import type { SourceRow } from './sources.ts';
import type { TaskRow } from './tasks.ts';

export interface RunSkill {
  name: string;
  slug: string;
  content: string;
  required_sources: string[];
}

/** An attached source as the run engine needs it: secrets still sealed. */
export type RunSource = Pick<
  SourceRow,
  | 'id'
  | 'organization_id'
  | 'slug'
  | 'name'
  | 'type'
  | 'config'
  | 'auth_type'
  | 'auth_config'
  | 'secrets_sealed'
>;

/** What the worker checks of the run's organization before executing (plan limits) and after (usage). */
export interface RunOrganization {
  id: string;
  plan: Plan;
  limit_overrides: LimitOverrides;
  billing_period_start: Date;
  payment_customer_id: string | null;
}

/**
 * The task as a run needs it: what the executor reads (runner/model-executor.ts), nothing else.
 * A task has 35 columns, its whole row was read for every run claimed; these seven are a
 * fifth of its JSON (without the prompt) for the database to write and the worker to parse.
 */
export type RunTask = Pick<
  TaskRow,
  'id' | 'model' | 'prompt' | 'timezone' | 'max_cost_cents_per_run' | 'output_schema' | 'required_tools'
>;

/**
 * What a worker needs to execute a run, read by the statement that claims it: its task, with
 * skills and sources in attachment order, and its organization's plan.
 */
export interface RunContextRow {
  task: RunTask;
  skills: RunSkill[];
  sources: RunSource[];
  organization: RunOrganization;
}

/**
 * The run context's columns, read in the statement that claims the runs (run-claim.ts), for the
 * task `t`: its organization, and its skills and sources in attachment order. The link tables
 * are read only for a task whose own row lists some (skill_ids and source_ids, exact copies of
 * the links in every snapshot, migration 0019): most tasks have none, and the two index probes
 * per run that would find nothing were a tenth of a claim's cost per run.
 */
export const RUN_CONTEXT_COLUMNS = `json_build_object('id', t.id, 'model', t.model, 'prompt', t.prompt, 'timezone', t.timezone,
         'max_cost_cents_per_run', t.max_cost_cents_per_run, 'output_schema', t.output_schema,
         'required_tools', t.required_tools) AS task,
       (SELECT json_build_object('id', o.id, 'plan', o.plan, 'limit_overrides', o.limit_overrides,
                 'billing_period_start', o.billing_period_start, 'payment_customer_id', o.payment_customer_id)
          FROM organizations o WHERE o.id = t.organization_id) AS organization,
       CASE WHEN t.skill_ids = '[]'::jsonb THEN '[]'::json ELSE
       coalesce((SELECT json_agg(json_build_object('name', s.name, 'slug', s.slug, 'content', s.content,
                   'required_sources', coalesce(s.frontmatter -> 'requiredSources', '[]'::jsonb)) ORDER BY x.position)
                   FROM task_skills x JOIN skills s ON s.id = x.skill_id WHERE x.task_id = t.id), '[]'::json) END AS skills,
       CASE WHEN t.source_ids = '[]'::jsonb THEN '[]'::json ELSE
       coalesce((SELECT json_agg(json_build_object('id', s.id, 'organization_id', s.organization_id,
                   'slug', s.slug, 'name', s.name, 'type', s.type, 'config', s.config, 'auth_type', s.auth_type,
                   'auth_config', s.auth_config, 'secrets_sealed', s.secrets_sealed) ORDER BY x.position)
                   FROM task_sources x JOIN sources s ON s.id = x.source_id WHERE x.task_id = t.id), '[]'::json) END AS sources`;

/** The context as read by RUN_CONTEXT_COLUMNS (as JSON), with its timestamp as the type says. */
export function runContextFromJson(row: RunContextRow): RunContextRow {
  row.organization.billing_period_start = new Date(row.organization.billing_period_start);
  return row;
}
