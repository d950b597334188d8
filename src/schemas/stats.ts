import { type Static, Type } from 'typebox';

/** Statistics, as the interface specification gives them (all optional numbers). */
export const Stats = Type.Object(
  {
    activeTasks: Type.Optional(Type.Number({ description: 'Tasks with status active' })),
    totalTasks: Type.Optional(Type.Number({ description: 'Tasks that exist now' })),
    totalRuns: Type.Optional(Type.Number({ description: 'Runs ever created (deleted ones included)' })),
    successfulRuns: Type.Optional(Type.Number({ description: 'Runs that completed' })),
    failedRuns: Type.Optional(Type.Number({ description: 'Runs that failed' })),
    totalCostCents: Type.Optional(Type.Number({ description: 'Cost of every run, in cents' })),
    totalTokensUsed: Type.Optional(Type.Number({ description: 'Tokens of every run' })),
  },
  { $id: 'Stats', title: 'Statistics' },
);
export type Stats = Static<typeof Stats>;
