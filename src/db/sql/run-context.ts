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
 * What a worker needs to execute a run, read by the statement that claims it: its task, with
 * skills and sources in attachment order, and its organization's plan.
 */
export interface RunContextRow {
  task: TaskRow;
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
export const RUN_CONTEXT_COLUMNS = `row_to_json(t) AS task,
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

/** The context as read by RUN_CONTEXT_COLUMNS (as JSON), with its timestamps as the types say. */
export function runContextFromJson(row: RunContextRow): RunContextRow {
  // row_to_json gives timestamps as strings; the executor needs none of them but the types say Date.
  const task = row.task as unknown as Record<string, unknown>;
  for (const k of ['next_run_at', 'last_run_at', 'created_at', 'updated_at']) {
    if (typeof task[k] === 'string') task[k] = new Date(task[k] as string);
  }
  row.organization.billing_period_start = new Date(row.organization.billing_period_start);
  return row;
}
