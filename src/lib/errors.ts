/**
 * The one catalogue of errors the service answers with. Every HTTP error body is
 * `{ "error": { "code", "message", "details"? } }`; the status comes from the code, so a
 * code can never be rendered with the wrong status.
 */
export const ERROR_STATUS = {
  validation_error: 400,
  unauthorized: 401,
  forbidden: 403,
  plan_limit_exceeded: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  precondition_failed: 412,
  idempotency_key_reused: 422,
  request_timeout: 408,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  request_header_too_large: 431,
  internal_error: 500,
  not_implemented: 501,
  upstream_error: 502,
  service_unavailable: 503,
  billing_not_configured: 503,
  connector_not_configured: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  /** JSON pointer into the request part that failed, e.g. `/body/name` or `/query/limit`. */
  path: string;
  message: string;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: ErrorDetail[] | undefined;
  /** Extra response headers (e.g. `Retry-After` on 429). */
  readonly headers: Record<string, string> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: ErrorDetail[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    // The cause is for logs (the error handler logs the chain); a response never shows it.
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.details = options.details;
    this.headers = options.headers;
  }
}

/** The message for every authentication failure: one text, so a caller cannot tell the causes apart. */
export const UNAUTHORIZED_MESSAGE = 'Invalid or missing API key';

export const errors = {
  validation: (message: string, details: ErrorDetail[] = [], cause?: unknown) =>
    new AppError('validation_error', message, { details, cause }),
  unauthorized: () => new AppError('unauthorized', UNAUTHORIZED_MESSAGE),
  notFound: (what: string) => new AppError('not_found', `${what} not found`),
  conflict: (message: string, cause?: unknown) => new AppError('conflict', message, { cause }),
  forbidden: (message: string) => new AppError('forbidden', message),
  planLimit: (message: string) => new AppError('plan_limit_exceeded', message),
  rateLimited: (retryAfterSeconds: number) =>
    new AppError('rate_limited', `Rate limit exceeded; retry in ${retryAfterSeconds} s`, {
      headers: { 'retry-after': String(retryAfterSeconds) },
    }),
  unavailable: (message: string, retryAfterSeconds?: number, cause?: unknown) =>
    new AppError('service_unavailable', message, {
      ...(retryAfterSeconds !== undefined && { headers: { 'retry-after': String(retryAfterSeconds) } }),
      cause,
    }),
  billingNotConfigured: (message: string, cause?: unknown) =>
    new AppError('billing_not_configured', message, { cause }),
  connectorNotConfigured: (message: string, cause?: unknown) =>
    new AppError('connector_not_configured', message, { cause }),
  notImplemented: (message: string) => new AppError('not_implemented', message),
  /** A server the service talks to on the caller's behalf (an OAuth provider) failed; the message says which and how. */
  upstream: (message: string) => new AppError('upstream_error', message),
};

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: ErrorDetail[] };
}

export function errorBody(err: AppError): ErrorBody {
  const body: ErrorBody = { error: { code: err.code, message: err.message } };
  if (err.details) body.error.details = err.details;
  return body;
}
