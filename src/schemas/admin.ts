import { type Static, Type } from 'typebox';
import {
  EMAIL_MAX_LENGTH,
  NAME_MAX_LENGTH,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
  PLANS,
} from './bounds.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

const Limit = Type.Integer({ minimum: 0, maximum: 1_000_000_000 });

export const PlanLimitsSchema = Type.Object({
  rateLimitPerMinute: Type.Integer(),
  tasksLimit: Type.Integer(),
  runsLimit: Nullable(Type.Integer({ description: 'null = unlimited' })),
  usersLimit: Type.Integer(),
  usageCreditsCents: Type.Integer(),
});

export const AdminOrganization = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    plan: StringEnum(PLANS),
    limits: PlanLimitsSchema,
    overrides: Type.Object({
      rateLimitPerMinute: Type.Optional(Type.Integer()),
      tasksLimit: Type.Optional(Type.Integer()),
      runsLimit: Type.Optional(Nullable(Type.Integer())),
      usersLimit: Type.Optional(Type.Integer()),
    }),
    billingPeriodStart: DateTime,
    createdAt: DateTime,
    updatedAt: DateTime,
  },
  { $id: 'AdminOrganization' },
);

export const CreateOrganizationBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    plan: Type.Optional(StringEnum(PLANS)),
  },
  { additionalProperties: false },
);
export type CreateOrganizationBody = Static<typeof CreateOrganizationBody>;

export const CreatedOrganization = Type.Object(
  {
    organizationId: Uuid,
    apiKey: Type.String({ description: 'Shown once; only its hash is stored.' }),
    webhookSecret: Type.String({ description: 'Standard Webhooks signing secret (whsec_...).' }),
  },
  { $id: 'CreatedOrganization' },
);

export const PatchOrganizationBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    plan: Type.Optional(StringEnum(PLANS)),
    rateLimitPerMinute: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 1_000_000 }))),
    tasksLimit: Type.Optional(Nullable(Limit)),
    runsLimit: Type.Optional(Type.Union([Limit, Type.Literal('unlimited'), Type.Null()])),
    usersLimit: Type.Optional(Nullable(Limit)),
  },
  {
    additionalProperties: false,
    description: 'A number sets an override, null removes it; runsLimit "unlimited" lifts the run cap.',
  },
);
export type PatchOrganizationBody = Static<typeof PatchOrganizationBody>;

export const AdminApiKey = Type.Object(
  {
    id: Uuid,
    organizationId: Uuid,
    name: Type.String(),
    prefix: Type.String(),
    createdAt: DateTime,
    expiresAt: Nullable(DateTime),
    revokedAt: Nullable(DateTime),
    lastUsedAt: Nullable(DateTime),
    createdBy: Type.Optional(
      Type.Object(
        { id: Uuid, email: Type.String() },
        { description: 'The user who created the key; absent when no user did (or the user is gone).' },
      ),
    ),
  },
  { $id: 'AdminApiKey' },
);

export const CreateKeyBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    expiresAt: Type.Optional(Type.String({ format: 'date-time' })),
  },
  { additionalProperties: false },
);
export type CreateKeyBody = Static<typeof CreateKeyBody>;

export const CreatedKey = Type.Object(
  {
    id: Uuid,
    apiKey: Type.String({ description: 'Shown once; only its hash is stored.' }),
    name: Type.String(),
    prefix: Type.String(),
    createdAt: DateTime,
    expiresAt: Nullable(DateTime),
  },
  { $id: 'CreatedKey' },
);

export const IdParams = Type.Object({ id: Uuid }, { additionalProperties: false });
export const KeyIdParams = Type.Object({ keyId: Uuid }, { additionalProperties: false });

const USER_ROLES = ['owner', 'member'] as const;

export const AdminUser = Type.Object(
  {
    id: Uuid,
    email: Type.String(),
    name: Nullable(Type.String()),
    role: StringEnum(USER_ROLES),
    createdAt: DateTime,
    lastSignInAt: Nullable(DateTime),
  },
  { $id: 'AdminUser' },
);

export const CreateUserBody = Type.Object(
  {
    email: Type.String({
      minLength: 3,
      maxLength: EMAIL_MAX_LENGTH,
      description: 'Stored trimmed and lower-cased.',
    }),
    password: Type.String({ minLength: PASSWORD_MIN_LENGTH, maxLength: PASSWORD_MAX_LENGTH }),
    name: Type.Optional(Type.String({ maxLength: NAME_MAX_LENGTH })),
    role: Type.Optional(
      StringEnum(USER_ROLES, {
        description: "Default: owner for the organization's first user, member after that.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreateUserBody = Static<typeof CreateUserBody>;

export const CreatedUser = Type.Object(
  {
    id: Uuid,
    email: Type.String(),
    role: StringEnum(USER_ROLES),
    createdAt: DateTime,
  },
  { $id: 'CreatedUser' },
);
