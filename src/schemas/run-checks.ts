// A task's checks on its runs: a cost cap per run, a JSON Schema for the final output, and the
// tools the model must have called. What the schema cannot say about an output schema (its
// size, depth, references, whether it compiles) is checked by domain/run-checks.ts.
import { Type } from 'typebox';
import {
  MAX_COST_CENTS_PER_RUN,
  MAX_REQUIRED_TOOL_NAME,
  MAX_REQUIRED_TOOLS,
  OUTPUT_SCHEMA_MAX_BYTES,
  OUTPUT_SCHEMA_MAX_DEPTH,
} from './bounds.ts';
import { Nullable } from './common.ts';

const MaxCost = Type.Number({
  minimum: 0,
  maximum: MAX_COST_CENTS_PER_RUN,
  description:
    'Cost cap of one run, in cents: each model call is bounded by what is left, and a run that reaches it fails with "Cost limit reached"',
});
// An object of any shape: the JSON Schema itself is checked when the task is saved.
const OutputSchema = Type.Unsafe<Record<string, unknown>>({
  type: 'object',
  additionalProperties: true,
  description: `A JSON Schema (draft-07) the run's final output must match, as JSON; at most ${OUTPUT_SCHEMA_MAX_BYTES / 1024} KiB and ${OUTPUT_SCHEMA_MAX_DEPTH} levels, only local $refs`,
});
const RequiredTools = Type.Array(
  Type.String({ minLength: 1, maxLength: MAX_REQUIRED_TOOL_NAME, pattern: '^\\S+$' }),
  {
    maxItems: MAX_REQUIRED_TOOLS,
    uniqueItems: true,
    description:
      "Tools the model must call at least once in a run: as offered (`<source slug>__<tool>`) or the tool's own name",
  },
);

/** The fields of a create body. */
export const runCheckCreateFields = {
  maxCostCentsPerRun: Type.Optional(MaxCost),
  outputSchema: Type.Optional(OutputSchema),
  requiredTools: Type.Optional(RequiredTools),
};

/** The fields of a PATCH body: null clears. */
export const runCheckUpdateFields = {
  maxCostCentsPerRun: Type.Optional(Nullable(MaxCost)),
  outputSchema: Type.Optional(Nullable(OutputSchema)),
  requiredTools: Type.Optional(Nullable(RequiredTools)),
};

/** The fields of the Task resource: present when set. */
export const runCheckTaskFields = {
  maxCostCentsPerRun: Type.Optional(Type.Number()),
  outputSchema: Type.Optional(OutputSchema),
  requiredTools: Type.Optional(Type.Array(Type.String())),
};
