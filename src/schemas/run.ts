import { type Static, Type } from 'typebox';
import { DateTime, LimitQuery, StringEnum, Uuid } from './common.ts';
import { CursorQuery } from './pagination.ts';

export const RUN_STATUSES = ['pending', 'running', 'completed', 'failed'] as const;
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export const RUN_TRIGGERS = ['schedule', 'manual', 'replay'] as const;

/** Run, field for field as the interface specification gives it (all optional). */
export const Run = Type.Object(
  {
    id: Type.Optional(Uuid),
    taskId: Type.Optional(Uuid),
    status: Type.Optional(StringEnum(RUN_STATUSES)),
    deliveryStatus: Type.Optional(
      StringEnum(DELIVERY_STATUSES, { description: 'Absent when the task has no destination' }),
    ),
    output: Type.Optional(Type.String({ description: 'AI-generated output' })),
    error: Type.Optional(Type.String({ description: 'Error message if the run failed' })),
    costCents: Type.Optional(Type.Number({ description: 'Cost in cents' })),
    tokensUsed: Type.Optional(Type.Number({ description: 'Total tokens consumed' })),
    durationMs: Type.Optional(Type.Number({ description: 'Execution time in milliseconds' })),
    createdAt: Type.Optional(DateTime),
    startedAt: Type.Optional(DateTime),
    completedAt: Type.Optional(DateTime),
    // Cancel and replay (docs/api.md, "Cancel and replay").
    trigger: Type.Optional(
      StringEnum(RUN_TRIGGERS, {
        description: 'What created the run: its schedule, run now, or a replay of another run',
      }),
    ),
    scheduledFor: Type.Optional(
      Type.String({
        format: 'date-time',
        description:
          "The schedule slot the run belongs to; on a replay, the slot of the run it replays (its time context's)",
      }),
    ),
    canceledAt: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'When a cancel ended the run (it is then failed, its error starting "Canceled")',
      }),
    ),
    replayOf: Type.Optional(Type.String({ format: 'uuid', description: 'The run a replay replays' })),
    model: Type.Optional(
      Type.String({ description: "A replay's model (other runs use their task's model)" }),
    ),
  },
  { $id: 'Run' },
);
export type Run = Static<typeof Run>;

/** POST /runs/{runId}/replay: the model defaults to the task's. */
export const ReplayBody = Type.Object(
  {
    model: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, description: "A catalog model's id or routerModelId" }),
    ),
  },
  { additionalProperties: false },
);
export type ReplayBody = Static<typeof ReplayBody>;

export const RunIdParams = Type.Object({ runId: Uuid }, { additionalProperties: false });
export const TaskRunsParams = Type.Object({ taskId: Uuid }, { additionalProperties: false });
export const TaskRunsQuery = Type.Object(
  { limit: Type.Optional(LimitQuery), cursor: Type.Optional(CursorQuery) },
  { additionalProperties: false },
);

/** `suppressed`: not sent, by the task's deliverOn (the output had not changed, or it was not a failure). */
export const DELIVERY_JOB_STATUSES = ['pending', 'sending', 'delivered', 'failed', 'suppressed'] as const;

/** One attempt to deliver a run to one destination. */
export const DeliveryAttempt = Type.Object({
  attempt: Type.Integer({ description: 'Counted from 1 over the whole life of the delivery' }),
  at: DateTime,
  durationMs: Type.Integer(),
  outcome: StringEnum(['delivered', 'failed'] as const),
  statusCode: Type.Optional(Type.Integer({ description: "The receiver's HTTP status (or SMTP reply code)" })),
  error: Type.Optional(Type.String()),
  response: Type.Optional(
    Type.String({ description: "The start of the receiver's answer (at most 1000 characters)" }),
  ),
});

/** The delivery of a run to one destination (or a legacy e-mail/SMS flag), with its attempts. */
export const Delivery = Type.Object({
  id: Uuid,
  destinationId: Type.Optional(Uuid),
  type: StringEnum(['email', 'sms', 'webhook'] as const),
  value: Type.String({ description: 'The address, number or URL, as it was when the run ended' }),
  label: Type.Optional(Type.String()),
  status: StringEnum(DELIVERY_JOB_STATUSES),
  nextAttemptAt: Type.Optional(DateTime),
  deliveredAt: Type.Optional(DateTime),
  error: Type.Optional(Type.String({ description: 'Why the last attempt failed' })),
  attempts: Type.Array(DeliveryAttempt),
});
export type Delivery = Static<typeof Delivery>;

/** GET /runs/{runId} and the redeliver answer: the Run with its deliveries. */
export const RunWithDeliveries = Type.Object(
  {
    ...Run.properties,
    deliveries: Type.Optional(
      Type.Array(Delivery, { description: 'Where the run is delivered (only on a single run), in order' }),
    ),
  },
  { $id: 'RunWithDeliveries' },
);
export type RunWithDeliveries = Static<typeof RunWithDeliveries>;
