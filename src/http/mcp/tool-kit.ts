// What every MCP tool shares: its input schema made from the API's own TypeBox schemas, the
// validation of its arguments with the API's body validator setup, the bound on its answer,
// and errors rendered as tool errors carrying the API's error code and message.
import type {
  CallToolResult,
  ToolAnnotations,
  Tool as ToolDefinition,
} from '@modelcontextprotocol/sdk/types.js';
import type { TObject, TProperties, TSchema } from 'typebox';
import { Value } from 'typebox/value';
import type { Principal } from '../../domain/authenticator.ts';
import type { Deps } from '../../domain/deps.ts';
import { newAjv } from '../../lib/ajv.ts';
import { AppError, errorBody } from '../../lib/errors.ts';
import { type AjvIssue, validationError } from '../../lib/validation-error.ts';
import { toAppError } from '../plugins/errors.ts';

/** A tool's answer above this many bytes (its JSON text) is refused as a tool error. */
export const MAX_TOOL_RESULT_BYTES = 1024 * 1024;

/** What a tool handler gets: the service's dependencies and the key's organization. */
export interface ToolContext {
  deps: Deps;
  principal: Principal;
}

/** One tool: what a client lists, and what runs when it is called. */
export interface Tool {
  name: string;
  title: string;
  description: string;
  /** The arguments: a TypeBox object schema (JSON Schema), `additionalProperties: false`. */
  input: TObject;
  /** The schema of the answer: fields not in it are not sent, as the REST API's serialiser does. */
  output: TSchema;
  annotations: ToolAnnotations;
  run(ctx: ToolContext, args: Record<string, unknown>): Promise<unknown>;
}

/**
 * A tool's argument schema: the given properties of the API's schemas (path parameters, query
 * fields, body fields) as one object, without `organizationId` (the key decides it), unknown
 * arguments refused as the API refuses unknown fields.
 */
export function argumentsOf(...parts: TProperties[]): TObject {
  const properties: Record<string, TSchema> = {};
  const required: string[] = [];
  for (const part of parts) {
    for (const [name, schema] of Object.entries(part)) {
      if (name === 'organizationId') continue;
      properties[name] = schema;
      if (!isOptional(schema)) required.push(name);
    }
  }
  return {
    type: 'object',
    properties,
    ...(required.length > 0 && { required }),
    additionalProperties: false,
  } as unknown as TObject;
}

/** TypeBox marks optional properties with a `~optional` flag on the property's schema. */
function isOptional(schema: TSchema): boolean {
  return (schema as Record<string, unknown>)['~optional'] === true;
}

/** The properties of a TypeBox object schema, to be combined by `argumentsOf`. */
export const fieldsOf = (schema: TObject): TProperties => schema.properties;

// One validator, set up as the API's request bodies are (types kept exactly, defaults applied).
const ajv = newAjv('json');
const compiled = new Map<string, (data: unknown) => boolean>();

/** The tool's arguments checked against its schema: a `validation_error` names each problem. */
function checkArguments(tool: Tool, args: unknown): Record<string, unknown> {
  let validate = compiled.get(tool.name) as ((data: unknown) => boolean) & { errors?: AjvIssue[] | null };
  if (!validate) {
    validate = ajv.compile(tool.input as object);
    compiled.set(tool.name, validate);
  }
  const value = structuredClone(args ?? {});
  if (!validate(value)) throw validationError('arguments', validate.errors ?? []);
  return value as Record<string, unknown>;
}

/** An error as a tool result: the API's error body (code, message, details), never a stack. */
export function toolError(err: AppError): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(errorBody(err)) }] };
}

/**
 * Calls one tool for the key's organization. Every failure becomes a tool error: what the API
 * would answer as a 4xx keeps its code and message; anything else is `internal_error`, logged.
 */
export async function callTool(ctx: ToolContext, tool: Tool, args: unknown): Promise<CallToolResult> {
  try {
    const result = await tool.run(ctx, checkArguments(tool, args));
    // Clean mutates what it is given: a copy, since an answer may be a frozen, shared view
    // (lib/frozen.ts).
    const text = JSON.stringify(
      result === undefined ? { ok: true } : Value.Clean(tool.output, Value.Clone(result)),
    );
    if (Buffer.byteLength(text) > MAX_TOOL_RESULT_BYTES) {
      throw new AppError(
        'payload_too_large',
        `The answer is larger than ${MAX_TOOL_RESULT_BYTES} bytes; ask for fewer items (limit) or one item at a time`,
      );
    }
    return { content: [{ type: 'text', text }] };
  } catch (err) {
    const appErr = toAppError(err as Error);
    if (appErr.status >= 500) ctx.deps.log.error({ err, tool: tool.name }, 'MCP tool failed');
    return toolError(appErr);
  }
}

/** The tool as `tools/list` shows it. */
export function definitionOf(tool: Tool): ToolDefinition {
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: tool.input as unknown as ToolDefinition['inputSchema'],
    annotations: { title: tool.title, ...tool.annotations },
  };
}

export const READ_ONLY: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };
