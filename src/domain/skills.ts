import {
  deleteSkill as deleteSkillRow,
  findSkill,
  insertSkill,
  listSkills as listSkillRows,
  type SkillRow,
  skillSlugsLike,
  updateSkill as updateSkillRow,
} from '../db/sql/skills.ts';
import { errors } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import { insertWithUniqueSlug, slugify } from '../lib/slug.ts';
import type { Skill, SkillCreateBody, SkillUpdateBody } from '../schemas/skill.ts';
import type { Deps } from './deps.ts';
import { assertSkillCaps, lockSkillTotals, utf8Bytes } from './org-caps.ts';
import { assertIfMatch, deleteIfMatch } from './preconditions.ts';

/** The API view of a stored skill: optional fields without a value are left out. */
export function skillView(row: SkillRow): Skill {
  const skill: Skill = {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    slug: row.slug,
    content: row.content,
    isPublic: row.is_public,
    isUserInvocable: row.is_user_invocable,
    version: row.version,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
  if (row.category !== null) skill.category = row.category;
  if (row.description !== null) skill.description = row.description;
  if (row.frontmatter !== null) skill.frontmatter = row.frontmatter;
  if (row.icon_url !== null) skill.iconUrl = row.icon_url;
  return skill;
}

export async function createSkill(deps: Deps, organizationId: string, body: SkillCreateBody): Promise<Skill> {
  const now = deps.clock.now();
  const id = newId();
  // Under the organization's row lock, so that concurrent creates cannot pass the caps.
  const row = await deps.db.transaction(async (tx) => {
    const totals = await lockSkillTotals(tx, organizationId);
    assertSkillCaps(totals, deps.config.orgCaps, { skills: 1, contentBytes: utf8Bytes(body.content) });
    return insertWithUniqueSlug({
      explicit: body.slug,
      base: slugify(body.name, 'skill'),
      taken: (base) => skillSlugsLike(tx, organizationId, base),
      conflict: (slug) => errors.conflict(`A skill with slug '${slug}' already exists in this organization`),
      insert: (slug) =>
        insertSkill(tx, {
          id,
          organization_id: organizationId,
          slug,
          name: body.name,
          content: body.content,
          category: body.category ?? null,
          description: body.description ?? null,
          frontmatter: body.frontmatter ?? null,
          icon_url: body.iconUrl ?? null,
          is_public: body.isPublic ?? false,
          is_user_invocable: body.isUserInvocable ?? true,
          now,
        }),
    });
  });
  return skillView(row);
}

export async function listSkills(deps: Deps, organizationId: string): Promise<Skill[]> {
  return (await listSkillRows(deps.db, organizationId)).map(skillView);
}

export async function getSkill(deps: Deps, organizationId: string, id: string): Promise<Skill> {
  const row = await findSkill(deps.db, organizationId, id);
  if (!row) throw errors.notFound('Skill');
  return skillView(row);
}

export async function updateSkill(
  deps: Deps,
  organizationId: string,
  id: string,
  body: SkillUpdateBody,
  ifMatch?: string,
): Promise<Skill> {
  const row = await deps.db.transaction(async (tx) => {
    // The organization's row before the skill's, in the order task creates take them.
    const totals = body.content === undefined ? undefined : await lockSkillTotals(tx, organizationId);
    const current = await findSkill(tx, organizationId, id, { forUpdate: true });
    if (!current) throw errors.notFound('Skill');
    assertIfMatch(ifMatch, skillView(current));
    if (totals && body.content !== undefined) {
      const contentBytes = utf8Bytes(body.content) - utf8Bytes(current.content);
      assertSkillCaps(totals, deps.config.orgCaps, { skills: 0, contentBytes });
    }
    return updateSkillRow(tx, organizationId, id, {
      name: body.name ?? current.name,
      content: body.content ?? current.content,
      category: body.category === undefined ? current.category : body.category,
      description: body.description === undefined ? current.description : body.description,
      frontmatter: body.frontmatter === undefined ? current.frontmatter : body.frontmatter,
      is_public: body.isPublic ?? current.is_public,
      is_user_invocable: body.isUserInvocable ?? current.is_user_invocable,
      now: deps.clock.now(),
    });
  });
  if (!row) throw errors.notFound('Skill');
  return skillView(row);
}

/** Deletes the skill; tasks it was attached to lose it (their other skills stay). */
export async function deleteSkill(
  deps: Deps,
  organizationId: string,
  id: string,
  ifMatch?: string,
): Promise<void> {
  const deleted = await deleteIfMatch(deps.db, ifMatch, {
    locked: async (tx) => (await findSkill(tx, organizationId, id, { forUpdate: true })) ?? undefined,
    view: skillView,
    remove: (tx) => deleteSkillRow(tx, organizationId, id),
  });
  if (!deleted) throw errors.notFound('Skill');
}
