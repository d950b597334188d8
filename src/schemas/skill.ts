import { type Static, Type } from 'typebox';
import { SLUG_MAX_LENGTH, SLUG_PATTERN } from '../lib/slug.ts';
import { DateTime, Nullable, Uuid } from './common.ts';

export const Slug = Type.String({
  pattern: SLUG_PATTERN,
  maxLength: SLUG_MAX_LENGTH,
  description: 'Lowercase letters and digits joined by single hyphens; unique in the organization',
});

/** An http(s) URL (other schemes such as javascript: or data: are refused). */
export const HttpUrl = Type.String({ format: 'uri', pattern: '^[Hh][Tt][Tt][Pp][Ss]?://', maxLength: 2048 });

export const SkillFrontmatter = Type.Object(
  {
    author: Type.Optional(Type.String({ maxLength: 200 })),
    requiredSources: Type.Optional(
      Type.Array(Slug, { maxItems: 50, description: 'Slugs of the sources the skill depends on' }),
    ),
    tags: Type.Optional(Type.Array(Type.String({ maxLength: 50 }), { maxItems: 20 })),
  },
  { additionalProperties: false },
);
export type SkillFrontmatter = Static<typeof SkillFrontmatter>;

const fields = {
  name: Type.String({ minLength: 1, maxLength: 255 }),
  content: Type.String({
    minLength: 1,
    maxLength: 100_000,
    description: 'Markdown instructions that guide task execution',
  }),
  category: Type.String({ maxLength: 100 }),
  description: Type.String({ maxLength: 2000 }),
  isPublic: Type.Boolean({ description: 'Whether the skill is shared publicly' }),
  isUserInvocable: Type.Boolean({ description: 'Whether users can manually attach the skill' }),
};

export const SkillCreateBody = Type.Object(
  {
    content: fields.content,
    name: fields.name,
    organizationId: Uuid,
    category: Type.Optional(fields.category),
    description: Type.Optional(fields.description),
    frontmatter: Type.Optional(SkillFrontmatter),
    iconUrl: Type.Optional(HttpUrl),
    isPublic: Type.Optional(fields.isPublic),
    isUserInvocable: Type.Optional(fields.isUserInvocable),
    slug: Type.Optional(Slug),
  },
  { additionalProperties: false },
);
export type SkillCreateBody = Static<typeof SkillCreateBody>;

/** All optional; null clears category, description or frontmatter. The slug never changes. */
export const SkillUpdateBody = Type.Object(
  {
    category: Type.Optional(Nullable(fields.category)),
    content: Type.Optional(fields.content),
    description: Type.Optional(Nullable(fields.description)),
    frontmatter: Type.Optional(Nullable(SkillFrontmatter)),
    isPublic: Type.Optional(fields.isPublic),
    isUserInvocable: Type.Optional(fields.isUserInvocable),
    name: Type.Optional(fields.name),
  },
  { additionalProperties: false },
);
export type SkillUpdateBody = Static<typeof SkillUpdateBody>;

/** The Skill resource, field for field as the interface specification gives it. */
export const Skill = Type.Object(
  {
    id: Uuid,
    content: Type.String(),
    name: Type.String(),
    category: Type.Optional(Type.String()),
    createdAt: Type.Optional(DateTime),
    description: Type.Optional(Type.String()),
    frontmatter: Type.Optional(
      Type.Object({
        author: Type.Optional(Type.String()),
        requiredSources: Type.Optional(Type.Array(Type.String())),
        tags: Type.Optional(Type.Array(Type.String())),
      }),
    ),
    iconUrl: Type.Optional(Type.String({ format: 'uri' })),
    isPublic: Type.Optional(Type.Boolean()),
    isUserInvocable: Type.Optional(Type.Boolean()),
    organizationId: Type.Optional(Uuid),
    slug: Type.Optional(Type.String()),
    updatedAt: Type.Optional(DateTime),
    version: Type.Optional(Type.Integer({ description: '1 at creation; +1 on every change of content' })),
  },
  { $id: 'Skill' },
);
export type Skill = Static<typeof Skill>;

export const SkillIdParams = Type.Object({ skillId: Uuid }, { additionalProperties: false });
