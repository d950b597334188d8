import type { SkillFrontmatter } from '../../schemas/skill.ts';
import type { Queryable } from '../db.ts';

export interface SkillRow {
  id: string;
  organization_id: string;
  name: string;
  slug: string;
  content: string;
  category: string | null;
  description: string | null;
  frontmatter: SkillFrontmatter | null;
  icon_url: string | null;
  is_public: boolean;
  is_user_invocable: boolean;
  version: number;
  created_at: Date;
  updated_at: Date;
}

/** The fields a create or an update writes. */
export interface SkillFields {
  name: string;
  content: string;
  category: string | null;
  description: string | null;
  frontmatter: SkillFrontmatter | null;
  is_public: boolean;
  is_user_invocable: boolean;
}

const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

export async function insertSkill(
  db: Queryable,
  row: SkillFields & {
    id: string;
    organization_id: string;
    slug: string;
    icon_url: string | null;
    now: Date;
  },
): Promise<SkillRow> {
  const [skill] = await db.query<SkillRow>(
    `INSERT INTO skills (id, organization_id, name, slug, content, category, description, frontmatter,
                         icon_url, is_public, is_user_invocable, version, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, 1, $12, $12) RETURNING *`,
    [
      row.id,
      row.organization_id,
      row.name,
      row.slug,
      row.content,
      row.category,
      row.description,
      json(row.frontmatter),
      row.icon_url,
      row.is_public,
      row.is_user_invocable,
      row.now,
    ],
  );
  if (!skill) throw new Error('insert returned no row');
  return skill;
}

/** Slugs of the organization's skills that are `base` or start with `base-`. */
export async function skillSlugsLike(db: Queryable, organizationId: string, base: string): Promise<string[]> {
  const rows = await db.query<{ slug: string }>(
    `SELECT slug FROM skills WHERE organization_id = $1 AND (slug = $2 OR starts_with(slug, $2 || '-'))`,
    [organizationId, base],
  );
  return rows.map((r) => r.slug);
}

export async function findSkill(
  db: Queryable,
  organizationId: string,
  id: string,
  options: { forUpdate?: boolean } = {},
): Promise<SkillRow | undefined> {
  const [skill] = await db.query<SkillRow>(
    options.forUpdate
      ? 'SELECT * FROM skills WHERE organization_id = $1 AND id = $2 FOR UPDATE'
      : 'SELECT * FROM skills WHERE organization_id = $1 AND id = $2',
    [organizationId, id],
  );
  return skill;
}

/** The organization's skills and the UTF-8 bytes of their content (lengths from the TOAST headers). */
export async function skillTotals(
  db: Queryable,
  organizationId: string,
): Promise<{ skills: number; contentBytes: number }> {
  const [row] = await db.query<{ skills: number; content_bytes: number }>(
    `SELECT count(*)::int AS skills, coalesce(sum(octet_length(content)), 0)::bigint AS content_bytes
       FROM skills WHERE organization_id = $1`,
    [organizationId],
  );
  return { skills: row?.skills ?? 0, contentBytes: row?.content_bytes ?? 0 };
}

export async function listSkills(db: Queryable, organizationId: string): Promise<SkillRow[]> {
  return db.query<SkillRow>(
    'SELECT * FROM skills WHERE organization_id = $1 ORDER BY created_at DESC, id DESC',
    [organizationId],
  );
}

/** Writes every field; `version` goes up by one when the content changes. */
export async function updateSkill(
  db: Queryable,
  organizationId: string,
  id: string,
  fields: SkillFields & { now: Date },
): Promise<SkillRow | undefined> {
  const [skill] = await db.query<SkillRow>(
    `UPDATE skills SET
       name = $3,
       version = CASE WHEN content IS DISTINCT FROM $4 THEN version + 1 ELSE version END,
       content = $4,
       category = $5,
       description = $6,
       frontmatter = $7::jsonb,
       is_public = $8,
       is_user_invocable = $9,
       updated_at = $10
     WHERE organization_id = $1 AND id = $2 RETURNING *`,
    [
      organizationId,
      id,
      fields.name,
      fields.content,
      fields.category,
      fields.description,
      json(fields.frontmatter),
      fields.is_public,
      fields.is_user_invocable,
      fields.now,
    ],
  );
  return skill;
}

const LOCK_SKILLS_TASKS = `SELECT t.id FROM tasks t
  WHERE t.organization_id = $1 AND t.id IN (SELECT x.task_id FROM task_skills x WHERE x.skill_id = $2)
  ORDER BY t.id FOR NO KEY UPDATE`;

/**
 * Deletes the skill; its links to tasks go with it (ON DELETE CASCADE), and the link triggers
 * then rewrite those tasks' rows (migration 0019). Run in a transaction: the tasks are locked
 * first, in id order, as a task's own edits lock it before its links, so that deleting a
 * skill while one of its tasks is edited waits instead of deadlocking.
 */
export async function deleteSkill(db: Queryable, organizationId: string, id: string): Promise<boolean> {
  await db.query(LOCK_SKILLS_TASKS, [organizationId, id]);
  const rows = await db.query('DELETE FROM skills WHERE organization_id = $1 AND id = $2 RETURNING id', [
    organizationId,
    id,
  ]);
  return rows.length > 0;
}
