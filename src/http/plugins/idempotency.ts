// Idempotency-Key on the POSTs of a scope: the key is claimed once the request is authenticated
// and valid (a 400 or 401 keeps nothing, so the request can be corrected and sent again with the
// same key), the first request's answer is kept as it is sent, and a repeat gets it again.
import type { FastifyRequest } from 'fastify';
import type { Deps } from '../../domain/deps.ts';
import {
  claimIdempotencyKey,
  finishIdempotencyKey,
  parseIdempotencyKey,
  requestFingerprint,
} from '../../domain/idempotency.ts';
import { type App, principalOf } from '../types.ts';

interface KeyState {
  key: string;
  fingerprint: string;
  /** Set while this request holds the key and its answer is not kept yet. */
  owner?: string | undefined;
}

const keyed = new WeakMap<FastifyRequest, KeyState>();

export function installIdempotency(scope: App, deps: Deps): void {
  // The hooks take callbacks, not async functions: every request of the scope passes them, and
  // only a POST with the header waits for anything (see app.ts).
  // Before validation: schema defaults are filled into the body then, and the fingerprint is of
  // what the client sent.
  scope.addHook('preValidation', (request, _reply, done) => {
    const header = request.headers['idempotency-key'];
    if (request.method !== 'POST' || header === undefined || request.is404) return done();
    let state: KeyState;
    try {
      const key = parseIdempotencyKey(header);
      state = { key, fingerprint: requestFingerprint(request.method, request.url, request.body) };
    } catch (err) {
      return done(err as Error);
    }
    keyed.set(request, state);
    done();
  });

  scope.addHook('preHandler', (request, reply, done) => {
    const state = keyed.get(request);
    if (!state) return done();
    claimIdempotencyKey(deps, principalOf(request).organizationId, state.key, state.fingerprint).then(
      (claim) => {
        if (claim.run) {
          state.owner = claim.owner;
          return done();
        }
        // The answer kept for the key: sent from here, the handler does not run (no done()).
        reply.code(claim.answer.status).headers(claim.answer.headers).header('idempotent-replayed', 'true');
        reply.send(claim.answer.body);
      },
      (err: Error) => done(err),
    );
  });

  scope.addHook('onSend', (request, reply, payload, done) => {
    const state = keyed.get(request);
    const owner = state?.owner;
    if (!state || !owner) return done(null, payload);
    state.owner = undefined;
    const body =
      payload === null || payload === undefined ? '' : typeof payload === 'string' ? payload : undefined;
    finishIdempotencyKey(deps, principalOf(request).organizationId, state.key, owner, {
      // An answer that is not text (none is today) is not kept: a 5xx-like release.
      status: body === undefined ? 500 : reply.statusCode,
      headers: reply.getHeaders(),
      body: body ?? '',
    })
      .catch((err: Error) => {
        // The answer still goes out; the key stays in flight until its lease ends.
        request.log.warn({ err: err.message }, 'idempotency key not completed');
      })
      .then(() => done(null, payload));
  });
}
