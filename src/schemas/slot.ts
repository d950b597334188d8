import { type Static, Type } from 'typebox';
import { DateTime, LimitQuery, StringEnum, Uuid } from './common.ts';
import { CursorQuery } from './pagination.ts';
import { commonFields } from './task.ts';

export const SLOT_OUTCOMES = [
  'ran',
  'skipped_overlap',
  'missed',
  'skipped_budget',
  'skipped_run_limit',
] as const;

/** What became of one schedule slot the scheduler passed. */
export const SlotRecord = Type.Object(
  {
    slotAt: DateTime,
    outcome: StringEnum(SLOT_OUTCOMES),
    runId: Type.Optional(Uuid),
    reason: Type.Optional(Type.String()),
    slots: Type.Optional(
      Type.Integer({
        minimum: 2,
        description:
          'Present when the record stands for more than one missed slot: this many, from slotAt on (the oldest slots of a long outage, folded)',
      }),
    ),
  },
  { $id: 'SlotRecord' },
);
export type SlotRecord = Static<typeof SlotRecord>;

export const SlotListQuery = Type.Object(
  { limit: Type.Optional(LimitQuery), cursor: Type.Optional(CursorQuery) },
  { additionalProperties: false },
);

/** `count` of upcoming slots: default 5, at most 100. */
const Count = Type.Integer({ minimum: 1, maximum: 100, default: 5 });
export const UpcomingQuery = Type.Object({ count: Type.Optional(Count) }, { additionalProperties: false });

export const UpcomingSlot = Type.Object(
  {
    at: DateTime,
    localTime: Type.String({
      description:
        "Local date-time with its offset in the schedule's timezone, e.g. 2026-03-29T03:30:00+02:00",
    }),
    note: Type.Optional(
      Type.String({
        description:
          'Where the DST rule moved the slot (a wall time that does not exist that day) or chose it (one that occurs twice)',
      }),
    ),
  },
  { $id: 'UpcomingSlot' },
);
export type UpcomingSlot = Static<typeof UpcomingSlot>;

export const SchedulePreviewBody = Type.Object(
  {
    organizationId: Uuid,
    schedule: Type.Optional(commonFields.schedule),
    scheduleTime: Type.Optional(commonFields.scheduleTime),
    scheduleDays: Type.Optional(commonFields.scheduleDays),
    timezone: Type.Optional(commonFields.timezone),
    cronExpression: Type.Optional(commonFields.cronExpression),
    count: Type.Optional(Count),
  },
  { additionalProperties: false },
);
export type SchedulePreviewBody = Static<typeof SchedulePreviewBody>;
