import { type Static, type TSchema, Type } from 'typebox';
import { ERROR_STATUS, type ErrorCode } from '../lib/errors.ts';
import { CursorQuery } from './pagination.ts';

/** A string enum rendered as `{ type: 'string', enum: [...] }` (what OpenAPI readers expect). */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: Record<string, unknown> = {},
) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

export const Uuid = Type.String({ format: 'uuid' });
export const DateTime = Type.String({ format: 'date-time' });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object({
      code: StringEnum(Object.keys(ERROR_STATUS) as ErrorCode[]),
      message: Type.String(),
      details: Type.Optional(
        Type.Array(Type.Object({ path: Type.String(), message: Type.String() }), {
          description: 'Present on validation errors: one entry per failed constraint.',
        }),
      ),
    }),
  },
  { $id: 'ErrorEnvelope', title: 'Error' },
);
export type ErrorEnvelope = Static<typeof ErrorEnvelope>;

/** Response schemas for the error statuses a route can answer, all in the one envelope. */
export function errorResponses(...statuses: number[]): Record<number, unknown> {
  const out: Record<number, unknown> = {};
  for (const s of statuses) out[s] = Type.Ref('ErrorEnvelope');
  return out;
}

export const OrganizationQuery = Type.Object(
  { organizationId: Type.String({ format: 'uuid', description: "The key's organization." }) },
  { additionalProperties: false },
);

/** `limit` on list endpoints: default 20, at most 100 (above is a 400, not a silent cap). */
export const LimitQuery = Type.Integer({ minimum: 1, maximum: 100, default: 20 });

export const OrganizationListQuery = Type.Object(
  {
    organizationId: Type.String({ format: 'uuid' }),
    limit: Type.Optional(LimitQuery),
    cursor: Type.Optional(CursorQuery),
  },
  { additionalProperties: false },
);
