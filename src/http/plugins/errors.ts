import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable } from '../../db/db.ts';
import { AppError, type ErrorCode, type ErrorDetail, errorBody } from '../../lib/errors.ts';
import type { App } from '../types.ts';

/** Details beyond this many are dropped: a huge invalid array must not make a huge response. */
const MAX_DETAILS = 20;

const PART_NAMES: Record<string, string> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'headers',
};

interface AjvIssue {
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
 * Framework errors (parsing, limits, routing) mapped onto the catalogue. A validation error
 * names the part of the request that failed in its one `details` entry, like every other.
 */
const FASTIFY_CODES: Record<string, { code: ErrorCode; message: string; detail?: ErrorDetail }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'unsupported_media_type',
    message: 'Content-Type must be application/json',
  },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large', message: 'Request body is larger than 1 MiB' },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    code: 'validation_error',
    message: 'Request body is not valid JSON',
    detail: { path: '/body', message: 'is not valid JSON' },
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    code: 'validation_error',
    message: 'Request body is empty; send a JSON object',
    detail: { path: '/body', message: 'is empty' },
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    code: 'validation_error',
    message: 'Content-Length does not match the body',
    detail: { path: '/headers/content-length', message: 'does not match the body' },
  },
  FST_ERR_BAD_URL: {
    code: 'validation_error',
    message: 'The URL is not validly percent-encoded',
    detail: { path: '/path', message: 'is not validly percent-encoded' },
  },
  FST_ERR_MAX_PARAM_LENGTH: {
    code: 'validation_error',
    message: 'A path parameter of the URL is too long',
    detail: { path: '/path', message: 'has a parameter that is too long' },
  },
};

const STATUS_CODES: Record<number, ErrorCode> = {
  400: 'validation_error',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
};

/** Turns anything thrown into the one error envelope; never a stack trace or framework body. */
export function toAppError(err: FastifyError | AppError | Error): AppError {
  if (err instanceof AppError) return err;
  const fe = err as FastifyError;
  if (fe.validation) {
    const details = validationDetails(fe.validationContext ?? 'body', fe.validation as AjvIssue[]);
    const first = details[0];
    const more = fe.validation.length > 1 ? ` (${fe.validation.length - 1} more problem(s) in details)` : '';
    return new AppError(
      'validation_error',
      first ? `${first.path} ${first.message}${more}` : 'Invalid request',
      {
        details,
      },
    );
  }
  const known = fe.code ? FASTIFY_CODES[fe.code] : undefined;
  if (known) return new AppError(known.code, known.message, known.detail && { details: [known.detail] });
  if (err instanceof SyntaxError) {
    return new AppError('validation_error', 'Request body is not valid JSON', {
      details: [{ path: '/body', message: 'is not valid JSON' }],
    });
  }
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new AppError(STATUS_CODES[fe.statusCode] ?? 'validation_error', fe.message);
  }
  if (isDatabaseUnavailable(err)) {
    return new AppError('service_unavailable', 'The database is unavailable; retry shortly', {
      headers: { 'retry-after': '5' },
    });
  }
  return new AppError('internal_error', 'Internal server error');
}

export function sendError(reply: FastifyReply, err: AppError): FastifyReply {
  if (err.headers) reply.headers(err.headers);
  return reply.code(err.status).type('application/json; charset=utf-8').send(errorBody(err));
}

export function installErrorHandling(app: App): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const appErr = toAppError(err);
    if (appErr.status >= 500) request.log.error({ err }, 'request failed');
    else request.log.debug({ code: appErr.code }, appErr.message);
    return sendError(reply, appErr);
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      new AppError('not_found', `No route for ${request.method} ${request.url.split('?')[0]}`),
    ),
  );
}
