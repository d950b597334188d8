import pino from 'pino';

export type Logger = pino.Logger;

/**
 * Structured JSON logs. Credentials are redacted by path wherever they might be logged; the
 * request serializer logs no headers at all.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'apiKey',
  'webhookSecret',
  'token',
  'password',
  '*.apiKey',
  '*.password',
  '*.token',
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, destination);
}
