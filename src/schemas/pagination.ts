import { Type } from 'typebox';

/**
 * `cursor` on the paginated lists: the opaque value of a `Link: <...>; rel="next"` header of
 * the same list. Bounded here (a cursor the service gives out is about 120 characters); what it
 * holds is checked by the list (400 at /query/cursor).
 */
export const CursorQuery = Type.String({
  minLength: 1,
  maxLength: 512,
  description: 'The next page: the cursor of the previous answer\'s Link rel="next" header; opaque.',
});

/** `limit` on the tasks, skills and sources lists: default 100, at most 100 (above is a 400). */
export const ResourcePageLimit = Type.Integer({ minimum: 1, maximum: 100, default: 100 });

/** The skills and sources lists' query. */
export const OrganizationPageQuery = Type.Object(
  {
    organizationId: Type.String({ format: 'uuid', description: "The key's organization." }),
    limit: Type.Optional(ResourcePageLimit),
    cursor: Type.Optional(CursorQuery),
  },
  { additionalProperties: false },
);
