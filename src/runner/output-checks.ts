// The checks of a run's final output against its task: every required tool called, and the
// output JSON matching the task's outputSchema. A run that fails them ends `failed` with an
// error starting "Output check failed", its output kept.
import { boundedText } from '../domain/run-checks.ts';
import { checkJsonSchema } from '../lib/json-schema-check.ts';

/** The JSON text of an output: the text, or what one Markdown code fence around all of it holds. */
export function jsonTextOf(output: string): string {
  const text = output.trim();
  const fenced = /^```(?:json)?[ \t]*\r?\n([\s\S]*?)\r?\n```$/.exec(text);
  return fenced?.[1] ?? text;
}

/** The required tools not among those called (by offered name or the tool's own), in task order. */
export function missingTools(required: readonly string[] | null, called: ReadonlySet<string>): string[] {
  return (required ?? []).filter((name) => !called.has(name));
}

/** Why the output fails the schema, or undefined when it matches. */
async function schemaProblem(schema: Record<string, unknown>, output: string): Promise<string | undefined> {
  const checked = await checkJsonSchema(schema, jsonTextOf(output));
  if (checked.ok) return undefined;
  switch (checked.kind) {
    case 'not_json':
      return `the output is not JSON (${boundedText(checked.message, 200)})`;
    case 'mismatch':
      return `the output does not match outputSchema: ${boundedText(`${checked.path} ${checked.message}`)}`;
    case 'bad_schema':
      return `outputSchema does not compile: ${boundedText(checked.message)}`;
    case 'too_costly':
      return `the output could not be checked against outputSchema: ${checked.message}; simplify the schema`;
  }
}

/** The run's error when its output fails the task's checks, or undefined when it passes. */
export async function outputCheckError(
  task: { output_schema: Record<string, unknown> | null; required_tools: string[] | null },
  output: string,
  called: ReadonlySet<string>,
): Promise<string | undefined> {
  const problems = missingTools(task.required_tools, called).map((name) => `${name} was not called`);
  if (task.output_schema) {
    const problem = await schemaProblem(task.output_schema, output);
    if (problem) problems.push(problem);
  }
  return problems.length > 0 ? `Output check failed: ${problems.join('; ')}` : undefined;
}
