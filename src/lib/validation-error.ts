// Ajv's problems as the one `validation_error`: shared by the JSON API's error handler and the
// dashboard's form checks, so a form reports a problem exactly as the API would.
import { AppError, type ErrorDetail } from './errors.ts';

/** Details beyond this many are dropped: a huge invalid array must not make a huge response. */
const MAX_DETAILS = 20;

const PART_NAMES: Record<string, string> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'headers',
};

/** One problem as Ajv reports it. */
export interface AjvIssue {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

function validationDetails(part: string, issues: AjvIssue[]): ErrorDetail[] {
  const prefix = `/${PART_NAMES[part] ?? part}`;
  return issues.slice(0, MAX_DETAILS).map((issue) => {
    let path = prefix + issue.instancePath;
    let message = issue.message ?? 'is invalid';
    if (issue.keyword === 'required') {
      path += `/${String(issue.params.missingProperty)}`;
      message = 'is required';
    } else if (issue.keyword === 'additionalProperties') {
      path += `/${String(issue.params.additionalProperty)}`;
      message = 'is not a known field';
    } else if (issue.keyword === 'enum' && Array.isArray(issue.params.allowedValues)) {
      message = `must be one of: ${issue.params.allowedValues.join(', ')}`;
    }
    return { path, message };
  });
}

/**
 * The problems of one part of a request (`body`, `querystring`, `params`, `headers`): the first
 * in the message, each in `details` with its path.
 */
export function validationError(part: string, issues: AjvIssue[]): AppError {
  const details = validationDetails(part, issues);
  const first = details[0];
  const more = issues.length > 1 ? ` (${issues.length - 1} more problem(s) in details)` : '';
  return new AppError(
    'validation_error',
    first ? `${first.path} ${first.message}${more}` : 'Invalid request',
    {
      details,
    },
  );
}
