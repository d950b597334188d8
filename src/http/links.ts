// The headers that point a client at another resource: `Link: <...>; rel="next"` on a list
// with a further page (RFC 8288) and `Location` on a 201 (the created resource). Both are
// absolute URLs built from the request (scheme and host as the client used them, through the
// trusted proxies), so they work behind a proxy that keeps the Host header.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Page } from '../domain/list-pages.ts';

function origin(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

/** The request's URL with `cursor` set to the next page's; every other query parameter kept. */
function nextPageUrl(request: FastifyRequest, cursor: string): string {
  const q = request.url.indexOf('?');
  const path = q === -1 ? request.url : request.url.slice(0, q);
  const params = new URLSearchParams(q === -1 ? '' : request.url.slice(q + 1));
  params.set('cursor', cursor);
  return `${origin(request)}${path}?${params}`;
}

/** A page's items as the body; its next page, when there is one, in the Link header. */
export function sendPage<T>(request: FastifyRequest, reply: FastifyReply, page: Page<T>): T[] {
  if (page.next) reply.header('link', `<${nextPageUrl(request, page.next)}>; rel="next"`);
  return page.items;
}

/** Answers 201 with the created resource's URL (`path` under this origin) in Location. */
export function created<T>(request: FastifyRequest, reply: FastifyReply, path: string, body: T): T {
  reply.code(201).header('location', `${origin(request)}${path}`);
  return body;
}
