import type { FastifySchemaValidationError } from 'fastify';
import { newAjv } from '../../lib/ajv.ts';
import type { App } from '../types.ts';

/** Text problems beyond this many are not listed (like schema failures). */
const MAX_TEXT_ISSUES = 20;

type TextIssue = FastifySchemaValidationError;

const pointer = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

/** Why a string cannot be stored as sent, or undefined when it can. */
function textProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
  if (!value.isWellFormed()) return 'must be well-formed Unicode (it has a lone UTF-16 surrogate)';
  return undefined;
}

/**
 * Whether any string of a JSON body (value or name) has a textProblem: the walk of every body
 * that passed its schema, without the paths textIssues builds, which only a bad body needs
 * (measured in a create, the paths were most of the walk's time). Without recursion, as there.
 */
function hasTextProblem(body: unknown): boolean {
  const stack: unknown[] = [body];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') {
      if (textProblem(value)) return true;
    } else if (Array.isArray(value)) {
      for (const item of value) stack.push(item);
    } else if (value !== null && typeof value === 'object') {
      for (const key of Object.keys(value)) {
        if (textProblem(key)) return true;
        stack.push((value as Record<string, unknown>)[key]);
      }
    }
  }
  return false;
}

/**
 * Strings of a JSON body (values and names) that PostgreSQL cannot store as sent: NUL is
 * refused by its text types, and a lone surrogate would silently become U+FFFD. Walked
 * without recursion, so a deeply nested body cannot exhaust the stack.
 */
function textIssues(body: unknown): TextIssue[] {
  const issues: TextIssue[] = [];
  const stack: [unknown, string][] = [[body, '']];
  while (stack.length > 0 && issues.length < MAX_TEXT_ISSUES) {
    const [value, path] = stack.pop() as [unknown, string];
    if (typeof value === 'string') {
      const message = textProblem(value);
      if (message) issues.push({ instancePath: path, schemaPath: '', keyword: 'text', message, params: {} });
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push([value[i], `${path}/${i}`]);
    } else if (value !== null && typeof value === 'object') {
      const keys = Object.keys(value);
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i] as string;
        const at = `${path}/${pointer(key)}`;
        const message = textProblem(key);
        if (message)
          issues.push({
            instancePath: at,
            schemaPath: '',
            keyword: 'text',
            message: `its name ${message}`,
            params: {},
          });
        stack.push([(value as Record<string, unknown>)[key], at]);
      }
    }
  }
  return issues;
}

type Validate = ((data: unknown) => boolean) & { errors?: FastifySchemaValidationError[] | null };

/**
 * Two validators: request bodies are JSON and keep their types exactly (a number where a
 * string belongs is a 400, not silently coerced); query strings and path parameters are text,
 * so they are coerced to the schema's types. A body that passes its schema must also hold only
 * text the database can store (see `textIssues`).
 */
export function installValidators(app: App): void {
  const bodyAjv = newAjv('json');
  const textAjv = newAjv('text');
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart !== 'body') return textAjv.compile(schema as object);
    const validate = bodyAjv.compile(schema as object);
    const checked: Validate = (data) => {
      if (!validate(data)) {
        checked.errors = (validate.errors as FastifySchemaValidationError[] | null | undefined) ?? null;
        return false;
      }
      const issues = hasTextProblem(data) ? textIssues(data) : [];
      checked.errors = issues.length > 0 ? issues : null;
      return issues.length === 0;
    };
    return checked;
  });
}
