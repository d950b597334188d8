import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable, isTransientConflict } from '../../db/db.ts';
import { AppError, type ErrorCode, type ErrorDetail, errorBody } from '../../lib/errors.ts';
import { type AjvIssue, validationError } from '../../lib/validation-error.ts';
import type { App } from '../types.ts';

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
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
};

/** Turns anything thrown into the one error envelope; never a stack trace or framework body. */
export function toAppError(err: FastifyError | AppError | Error): AppError {
  if (err instanceof AppError) return err;
  const fe = err as FastifyError;
  if (fe.validation) return validationError(fe.validationContext ?? 'body', fe.validation as AjvIssue[]);
  const known = fe.code ? FASTIFY_CODES[fe.code] : undefined;
  if (known) {
    return new AppError(known.code, known.message, {
      ...(known.detail && { details: [known.detail] }),
      cause: err,
    });
  }
  if (err instanceof SyntaxError) {
    return new AppError('validation_error', 'Request body is not valid JSON', {
      details: [{ path: '/body', message: 'is not valid JSON' }],
      cause: err,
    });
  }
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new AppError(STATUS_CODES[fe.statusCode] ?? 'validation_error', fe.message, { cause: err });
  }
  if (isDatabaseUnavailable(err)) {
    return new AppError('service_unavailable', 'The database is unavailable; retry shortly', {
      headers: { 'retry-after': '5' },
      cause: err,
    });
  }
  if (isTransientConflict(err)) {
    return new AppError(
      'service_unavailable',
      'The request met a concurrent change in the database and was not applied; retry it',
      { headers: { 'retry-after': '1' }, cause: err },
    );
  }
  return new AppError('internal_error', 'Internal server error', { cause: err });
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
  app.setNotFoundHandler(answerNotFound);
}

/** The methods a route may have (Fastify adds HEAD to every GET route). */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/**
 * The answer to a request no route matches; an authenticated scope answers it after its guard.
 * A path that some route serves with other methods is a 405 with those methods in `Allow`
 * (RFC 9110); any other path a 404.
 */
export function answerNotFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const path = request.url.split('?')[0] ?? '/';
  const allowed = METHODS.filter((method) => request.server.findRoute({ method, url: path }) !== null);
  // A route that matched and found nothing to serve (a missing static file) is a 404 as well.
  if (allowed.length > 0 && !allowed.includes(request.method as (typeof METHODS)[number])) {
    return sendError(
      reply,
      new AppError(
        'method_not_allowed',
        `${request.method} is not allowed on ${path}; use ${allowed.join(', ')}`,
        {
          headers: { allow: allowed.join(', ') },
        },
      ),
    );
  }
  return sendError(reply, new AppError('not_found', `No route for ${request.method} ${path}`));
}
