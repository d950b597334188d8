import { type Static, Type } from 'typebox';
import { DateTime, LimitQuery, StringEnum, Uuid } from './common.ts';

export const RUN_STATUSES = ['pending', 'running', 'completed', 'failed'] as const;
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;

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
  },
  { $id: 'Run' },
);
export type Run = Static<typeof Run>;

export const RunIdParams = Type.Object({ runId: Uuid }, { additionalProperties: false });
export const TaskRunsParams = Type.Object({ taskId: Uuid }, { additionalProperties: false });
export const TaskRunsQuery = Type.Object(
  { limit: Type.Optional(LimitQuery) },
  { additionalProperties: false },
);
