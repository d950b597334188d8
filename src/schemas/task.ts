import { type Static, Type } from 'typebox';
import { WEEKDAYS } from '../schedule/slots.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';
import { CursorQuery, ResourcePageLimit } from './pagination.ts';
import { runCheckCreateFields, runCheckTaskFields, runCheckUpdateFields } from './run-checks.ts';
import { Skill } from './skill.ts';
import { Source } from './source.ts';

export const SCHEDULES = ['once', 'hourly', 'daily', 'weekly'] as const;
export const TASK_STATUSES = ['active', 'paused', 'completed'] as const;
export const DESTINATION_TYPES = ['email', 'sms', 'webhook'] as const;
export const DELIVER_ON = ['always', 'change', 'failure'] as const;

/** E.164: a plus, a non-zero country digit, up to 15 digits in all. */
export const E164_PATTERN = '^\\+[1-9][0-9]{6,14}$';
const ScheduleTime = Type.String({
  pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$',
  description: 'HH:MM, 24-hour',
});
const Timezone = Type.String({ minLength: 1, maxLength: 64, description: 'IANA timezone name' });
const Cron = Type.String({ minLength: 9, maxLength: 200, description: '5-field cron expression' });
const Email = Type.String({ format: 'email', maxLength: 320 });
const Phone = Type.String({ pattern: E164_PATTERN, description: 'E.164 phone number, e.g. +14155550123' });
const Days = Type.Array(StringEnum(WEEKDAYS), { uniqueItems: true, maxItems: 7 });
const IdList = Type.Array(Uuid, { uniqueItems: true, maxItems: 50 });

export const DestinationInput = Type.Object(
  {
    type: StringEnum(DESTINATION_TYPES),
    value: Type.String({
      minLength: 1,
      maxLength: 2048,
      description: 'E-mail address, phone number or webhook URL',
    }),
    label: Type.Optional(Type.String({ maxLength: 255 })),
  },
  { additionalProperties: false },
);
export type DestinationInput = Static<typeof DestinationInput>;

export const DestinationPatch = Type.Object(
  {
    type: Type.Optional(StringEnum(DESTINATION_TYPES)),
    value: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    label: Type.Optional(Nullable(Type.String({ maxLength: 255 }))),
  },
  { additionalProperties: false },
);
export type DestinationPatch = Static<typeof DestinationPatch>;

export const Destination = Type.Object(
  {
    id: Type.Optional(Uuid),
    type: StringEnum(DESTINATION_TYPES),
    value: Type.String(),
    label: Type.Optional(Type.String()),
  },
  { $id: 'Destination' },
);
export type Destination = Static<typeof Destination>;

/** The schema of each task field (schedule previews take the schedule fields from here). */
export const commonFields = {
  name: Type.String({ minLength: 1, maxLength: 255 }),
  prompt: Type.String({ minLength: 1, maxLength: 100_000 }),
  model: Type.String({ minLength: 1, maxLength: 200, description: "A catalog model's id or routerModelId" }),
  schedule: StringEnum(SCHEDULES),
  scheduleTime: ScheduleTime,
  scheduleDays: Days,
  timezone: Timezone,
  cronExpression: Cron,
  deliveryEmail: Type.Boolean(),
  deliveryEmailAddress: Email,
  deliverySms: Type.Boolean(),
  deliveryPhoneNumber: Phone,
  destinations: Type.Array(DestinationInput, { maxItems: 20 }),
  skillIds: IdList,
  sourceIds: IdList,
  autoPauseAfterFailures: Type.Integer({
    minimum: 0,
    maximum: 100,
    description: 'Consecutive failed runs after which the task pauses itself; 0 = never (default 5)',
  }),
  deliverOn: StringEnum(DELIVER_ON, {
    description:
      'always (default); change: a completed run whose output equals the last delivered one is not sent; failure: only failed runs are sent',
  }),
  monthlyCostLimitCents: Type.Number({
    minimum: 0,
    maximum: 100_000_000,
    description:
      "Cents per billing period: once the task's cost in the organization's current period reaches it, scheduled slots are skipped and Run now answers 409 until the next period",
  }),
};

export const TaskCreateBody = Type.Object(
  {
    name: commonFields.name,
    prompt: commonFields.prompt,
    organizationId: Uuid,
    model: Type.Optional(commonFields.model),
    schedule: Type.Optional(commonFields.schedule),
    scheduleTime: Type.Optional(commonFields.scheduleTime),
    scheduleDays: Type.Optional(commonFields.scheduleDays),
    timezone: Type.Optional(commonFields.timezone),
    cronExpression: Type.Optional(commonFields.cronExpression),
    deliveryEmail: Type.Optional(commonFields.deliveryEmail),
    deliveryEmailAddress: Type.Optional(commonFields.deliveryEmailAddress),
    deliverySms: Type.Optional(commonFields.deliverySms),
    deliveryPhoneNumber: Type.Optional(commonFields.deliveryPhoneNumber),
    destinations: Type.Optional(commonFields.destinations),
    skillIds: Type.Optional(commonFields.skillIds),
    sourceIds: Type.Optional(commonFields.sourceIds),
    ...runCheckCreateFields,
    autoPauseAfterFailures: Type.Optional(commonFields.autoPauseAfterFailures),
    deliverOn: Type.Optional(commonFields.deliverOn),
    monthlyCostLimitCents: Type.Optional(commonFields.monthlyCostLimitCents),
  },
  { additionalProperties: false },
);
export type TaskCreateBody = Static<typeof TaskCreateBody>;

/** All optional; null clears an optional field (scheduleTime, scheduleDays, cronExpression, delivery fields). */
export const TaskUpdateBody = Type.Object(
  {
    name: Type.Optional(commonFields.name),
    prompt: Type.Optional(commonFields.prompt),
    model: Type.Optional(commonFields.model),
    status: Type.Optional(StringEnum(TASK_STATUSES)),
    schedule: Type.Optional(commonFields.schedule),
    scheduleTime: Type.Optional(Nullable(commonFields.scheduleTime)),
    scheduleDays: Type.Optional(Nullable(commonFields.scheduleDays)),
    timezone: Type.Optional(commonFields.timezone),
    cronExpression: Type.Optional(Nullable(commonFields.cronExpression)),
    deliveryEmail: Type.Optional(commonFields.deliveryEmail),
    deliveryEmailAddress: Type.Optional(Nullable(commonFields.deliveryEmailAddress)),
    deliverySms: Type.Optional(commonFields.deliverySms),
    deliveryPhoneNumber: Type.Optional(Nullable(commonFields.deliveryPhoneNumber)),
    destinations: Type.Optional(commonFields.destinations),
    skillIds: Type.Optional(commonFields.skillIds),
    sourceIds: Type.Optional(commonFields.sourceIds),
    ...runCheckUpdateFields,
    autoPauseAfterFailures: Type.Optional(commonFields.autoPauseAfterFailures),
    deliverOn: Type.Optional(commonFields.deliverOn),
    monthlyCostLimitCents: Type.Optional(Nullable(commonFields.monthlyCostLimitCents)),
  },
  { additionalProperties: false },
);
export type TaskUpdateBody = Static<typeof TaskUpdateBody>;

/** The Task resource, field for field as the interface specification gives it. */
export const Task = Type.Object(
  {
    id: Uuid,
    createdAt: DateTime,
    model: Type.String(),
    name: Type.String(),
    prompt: Type.String(),
    schedule: StringEnum(SCHEDULES),
    status: StringEnum(TASK_STATUSES),
    cronExpression: Type.Optional(Type.String()),
    deliveryEmail: Type.Optional(Type.Boolean()),
    deliveryEmailAddress: Type.Optional(Type.String({ format: 'email' })),
    deliveryPhoneNumber: Type.Optional(Type.String()),
    deliverySms: Type.Optional(Type.Boolean()),
    destinations: Type.Optional(Type.Array(Destination)),
    lastRunAt: Type.Optional(Nullable(DateTime)),
    nextRunAt: Type.Optional(Nullable(DateTime)),
    organizationId: Type.Optional(Uuid),
    scheduleDays: Type.Optional(Days),
    scheduleTime: Type.Optional(Type.String()),
    skillIds: Type.Optional(Type.Array(Uuid)),
    skills: Type.Optional(Type.Array(Skill, { description: 'Present with ?expand=skills' })),
    sourceIds: Type.Optional(Type.Array(Uuid)),
    sources: Type.Optional(Type.Array(Source, { description: 'Present with ?expand=sources' })),
    timezone: Type.Optional(Type.String()),
    updatedAt: Type.Optional(DateTime),
    userId: Type.Optional(Type.String()),
    ...runCheckTaskFields,
    autoPauseAfterFailures: Type.Optional(commonFields.autoPauseAfterFailures),
    deliverOn: Type.Optional(StringEnum(DELIVER_ON)),
    consecutiveFailures: Type.Optional(
      Type.Integer({
        description: 'Failed runs in a row (read-only; a completed run or resuming resets it)',
      }),
    ),
    pausedReason: Type.Optional(
      Type.String({ description: 'Why the task paused itself (read-only; present while it stays paused)' }),
    ),
    monthlyCostLimitCents: Type.Optional(Type.Number({ description: 'Absent: no monthly cost limit' })),
  },
  { $id: 'Task' },
);
export type Task = Static<typeof Task>;

export const TaskIdParams = Type.Object({ taskId: Uuid }, { additionalProperties: false });
export const DestinationIdParams = Type.Object(
  { taskId: Uuid, destinationId: Uuid },
  { additionalProperties: false },
);
export const ExpandQuery = Type.Object(
  {
    expand: Type.Optional(
      Type.String({
        pattern: '^(skills|sources)(,(skills|sources))?$',
        description: 'skills, sources or both',
      }),
    ),
  },
  { additionalProperties: false },
);
export const TaskListQuery = Type.Object(
  {
    organizationId: Uuid,
    expand: ExpandQuery.properties.expand,
    limit: Type.Optional(ResourcePageLimit),
    cursor: Type.Optional(CursorQuery),
  },
  { additionalProperties: false },
);
