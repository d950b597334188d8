// Entity tags on single resources (GET /x/:xId and the answer of its PATCH) and If-None-Match on
// those GETs. The tag is computed from the answer's representation, the same way the domain
// computes it under a write's row lock for If-Match (domain/preconditions.ts).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { entityTag, noneMatchHits } from '../../domain/preconditions.ts';
import type { App } from '../types.ts';

/** A route of one resource: its URL ends in the resource's id parameter. */
const SINGLE_RESOURCE = /\/:[A-Za-z]*[iI]d$/;
/** Route templates already tested against SINGLE_RESOURCE (a fixed set: the registered routes). */
const singleResource = new Map<string, boolean>();

function isSingleResource(url: string): boolean {
  let single = singleResource.get(url);
  if (single === undefined) {
    single = SINGLE_RESOURCE.test(url);
    singleResource.set(url, single);
  }
  return single;
}

function taggable(request: FastifyRequest, reply: FastifyReply): boolean {
  if (reply.statusCode !== 200 || !isSingleResource(request.routeOptions.url ?? '')) return false;
  if (request.method === 'PATCH') return true;
  // `expand` embeds other resources: such an answer is not the resource's own representation.
  const query = request.query as Record<string, unknown> | undefined;
  return (request.method === 'GET' || request.method === 'HEAD') && query?.expand === undefined;
}

export function installConditionalRequests(scope: App): void {
  // The tag of an answer the handler returned as an object is computed from that object, before
  // it is serialised: the same representation the domain tags, without parsing the JSON text
  // back (a handler that sends text is tagged from the parsed text, below). Both hooks take a
  // callback: they never wait (see app.ts).
  const tags = new WeakMap<FastifyReply, string>();
  scope.addHook('preSerialization', (request, reply, payload, done) => {
    if (taggable(request, reply)) tags.set(reply, entityTag(payload));
    done(null, payload);
  });
  scope.addHook('onSend', (request, reply, payload, done) => {
    if (typeof payload !== 'string' || !taggable(request, reply)) return done(null, payload);
    const tag = tags.get(reply) ?? entityTag(JSON.parse(payload));
    reply.header('etag', tag);
    const ifNoneMatch = request.headers['if-none-match'];
    if (request.method !== 'PATCH' && ifNoneMatch !== undefined && noneMatchHits(ifNoneMatch, tag)) {
      reply.code(304);
      reply.removeHeader('content-type');
      reply.removeHeader('content-length');
      return done(null, '');
    }
    done(null, payload);
  });
}
