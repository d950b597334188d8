// A task's checks on its runs (cost cap, output schema, required tools): the rules applied when
// a task is saved, and the fields as stored and as shown. The runs apply them in
// runner/model-executor.ts and runner/output-checks.ts.
import type { TaskRow } from '../db/sql/tasks.ts';
import { AppError, type ErrorDetail } from '../lib/errors.ts';
import { checkJsonSchema } from '../lib/json-schema-check.ts';
import { OUTPUT_SCHEMA_MAX_BYTES, OUTPUT_SCHEMA_MAX_DEPTH } from '../schemas/bounds.ts';
import type { Task, TaskCreateBody, TaskUpdateBody } from '../schemas/task.ts';

export type RunCheckColumns = Pick<TaskRow, 'max_cost_cents_per_run' | 'output_schema' | 'required_tools'>;

/** Characters of a compile problem quoted in an error (Ajv's messages may quote the schema). */
const MAX_PROBLEM_CHARS = 300;

export const boundedText = (text: string, max = MAX_PROBLEM_CHARS) =>
  text.length <= max ? text : `${text.slice(0, max - 1)}…`;

/** An empty list requires nothing: stored as none. */
const tools = (list: string[] | null | undefined) => (list?.length ? list : null);

export function runCheckColumnsOf(body: TaskCreateBody): RunCheckColumns {
  return {
    max_cost_cents_per_run: body.maxCostCentsPerRun ?? null,
    output_schema: body.outputSchema ?? null,
    required_tools: tools(body.requiredTools),
  };
}

/** The columns after a PATCH: a field left out keeps its value, null clears it. */
export function patchedRunCheckColumns(patch: TaskUpdateBody, current: RunCheckColumns): RunCheckColumns {
  return {
    max_cost_cents_per_run:
      patch.maxCostCentsPerRun !== undefined ? patch.maxCostCentsPerRun : current.max_cost_cents_per_run,
    output_schema: patch.outputSchema !== undefined ? patch.outputSchema : current.output_schema,
    required_tools: patch.requiredTools !== undefined ? tools(patch.requiredTools) : current.required_tools,
  };
}

/** The Task fields of the checks, present when set. */
export function runCheckView(
  row: RunCheckColumns,
): Pick<Task, 'maxCostCentsPerRun' | 'outputSchema' | 'requiredTools'> {
  return {
    ...(row.max_cost_cents_per_run !== null && { maxCostCentsPerRun: Number(row.max_cost_cents_per_run) }),
    ...(row.output_schema !== null && { outputSchema: row.output_schema }),
    ...(row.required_tools !== null && { requiredTools: row.required_tools }),
  };
}

/**
 * Why the schema's shape is refused before it is compiled: too large, too deep, or a `$ref`
 * that is not local to the schema (nothing is ever fetched; `"$ref": "#/definitions/x"` is
 * fine). Any `$ref` key with a text value counts, wherever it is.
 */
export function outputSchemaShapeProblem(schema: unknown): string | undefined {
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > OUTPUT_SCHEMA_MAX_BYTES) {
    return `is ${bytes} bytes as JSON, more than the ${OUTPUT_SCHEMA_MAX_BYTES / 1024} KiB a task's output schema may have`;
  }
  const stack: { value: unknown; depth: number }[] = [{ value: schema, depth: 1 }];
  for (let item = stack.pop(); item; item = stack.pop()) {
    const { value, depth } = item;
    if (value === null || typeof value !== 'object') continue;
    if (depth > OUTPUT_SCHEMA_MAX_DEPTH) {
      return `is nested more than ${OUTPUT_SCHEMA_MAX_DEPTH} levels deep`;
    }
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string' && !child.startsWith('#')) {
        return `refers to "${boundedText(child, 100)}": only references within the schema ("#...") are allowed`;
      }
      stack.push({ value: child, depth: depth + 1 });
    }
  }
  return undefined;
}

/** Why a task's output schema is refused, or undefined: its shape, then whether it compiles. */
export async function outputSchemaProblem(schema: Record<string, unknown>): Promise<string | undefined> {
  const shape = outputSchemaShapeProblem(schema);
  if (shape) return shape;
  const compiled = await checkJsonSchema(schema);
  if (compiled.ok) return undefined;
  if (compiled.kind === 'too_costly') return `could not be compiled: ${compiled.message}; simplify it`;
  return `is not a valid JSON Schema: ${boundedText(compiled.message)}`;
}

/**
 * Organizations whose output schema is being compiled in this process: one at a time each, so
 * that one organization's saves cannot take every checking thread (lib/json-schema-check.ts).
 */
const compiling = new Set<string>();

/** The problems of a create or PATCH body's run checks, with their paths. */
export async function runCheckProblems(
  organizationId: string,
  body: { outputSchema?: Record<string, unknown> | null | undefined },
): Promise<ErrorDetail[]> {
  if (!body.outputSchema) return [];
  if (compiling.has(organizationId)) {
    throw new AppError(
      'rate_limited',
      "Another of the organization's output schemas is being checked; send this one when it is done",
      { headers: { 'Retry-After': '5' } },
    );
  }
  compiling.add(organizationId);
  try {
    const problem = await outputSchemaProblem(body.outputSchema);
    return problem ? [{ path: '/body/outputSchema', message: problem }] : [];
  } finally {
    compiling.delete(organizationId);
  }
}
