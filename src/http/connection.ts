// What happens below the request lifecycle: the server's time and connection bounds, the
// answers to requests Node refuses before Fastify sees them, and the decoding of JSON bodies.
import type { ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import { AppError, errorBody } from '../lib/errors.ts';
import type { App } from './types.ts';

/**
 * How often Node looks for requests past their time limit. Node's default (30 s) would let a
 * request outlive a short limit by up to that much.
 */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/** Request heads above this are answered 431 (Node's default, stated here so the docs can cite it). */
export const MAX_HEADER_BYTES = 16 * 1024;

/** Fastify server options that bound time and head size; the connection cap is set on the server. */
export function serverBounds(config: Config['http']) {
  const http: ServerOptions = {
    connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
    maxHeaderSize: MAX_HEADER_BYTES,
    // The head has to arrive within the same limit as the whole request. Node checks the two
    // against each other when the server is made, before Fastify sets requestTimeout below.
    headersTimeout: config.requestTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
  };
  return {
    http,
    // Counted from the first byte of a request to its last: a body trickled in byte by byte
    // is cut off even though each byte resets the socket's idle timer.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    clientErrorHandler,
  };
}

export function capConnections(app: App, config: Config['http']): void {
  app.server.maxConnections = config.maxConnections;
}

/** The answer Node's own parser or timers give, in the error envelope. */
function clientErrorAnswer(code: string | undefined): AppError {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new AppError('request_timeout', 'The request did not arrive in time');
    case 'HPE_HEADER_OVERFLOW':
      return new AppError(
        'request_header_too_large',
        `The request head is larger than ${MAX_HEADER_BYTES / 1024} KiB`,
      );
    default:
      return new AppError('validation_error', 'The request is not valid HTTP', {
        details: [{ path: '/request', message: 'is not valid HTTP' }],
      });
  }
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/**
 * Answers a request that Node refused (malformed, head too large, too slow) and closes the
 * connection. Nothing is written when a response has already begun on it.
 */
function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const inProgress = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inProgress?.headersSent) {
    const answer = clientErrorAnswer(err.code);
    const body = JSON.stringify(errorBody(answer));
    socket.write(
      `HTTP/1.1 ${answer.status} ${REASONS[answer.status]}\r\n` +
        'Connection: close\r\n' +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * JSON bodies decoded strictly: bytes that are not UTF-8 are a 400, where the default parser
 * would store them as U+FFFD. Parsing is then Fastify's own (it refuses `__proto__`).
 */
export function installJsonParser(app: App): void {
  const parseJson = app.getDefaultJsonParser('error', 'ignore');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer' },
    (request: FastifyRequest, body: Buffer, done: (err: Error | null, value?: unknown) => void) => {
      let text: string;
      try {
        text = utf8.decode(body);
      } catch {
        done(
          new AppError('validation_error', 'Request body is not valid UTF-8', {
            details: [{ path: '/body', message: 'is not valid UTF-8' }],
          }),
        );
        return;
      }
      parseJson(request, text, done);
    },
  );
}
