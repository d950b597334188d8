import assert from 'node:assert/strict';
import type { Reply } from './service.ts';

/**
 * The reply is the one error envelope `{ "error": { "code", "message", "details"? } }` with this
 * status and code: JSON, a non-empty message, nothing beside `error`, no stack trace and never
 * the framework's default body.
 */
export function assertEnvelope(reply: Reply, status: number, code: string): void {
  assert.equal(reply.status, status, reply.raw);
  assert.match(String(reply.headers['content-type']), /^application\/json/);
  assert.equal(reply.body?.error?.code, code, reply.raw);
  assert.equal(typeof reply.body.error.message, 'string');
  assert.ok(reply.body.error.message.length > 0, 'a message');
  assert.deepEqual(Object.keys(reply.body), ['error'], 'only the envelope, never a framework body');
  assert.ok(!/\bat .+\.ts:\d+/.test(reply.raw), 'no stack trace');
  assert.ok(!('statusCode' in reply.body), 'not the framework default shape');
}

/** A 400 `validation_error` envelope with a `details` entry at `path` (e.g. `/body/name`). */
export function assertValidation(reply: Reply, path: string): void {
  assertEnvelope(reply, 400, 'validation_error');
  const paths = reply.body.error.details.map((d: { path: string }) => d.path);
  assert.ok(paths.includes(path), `expected a detail at ${path}, got ${paths.join(', ')}`);
}
