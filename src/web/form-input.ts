// Form bodies as the dashboard accepts them, and the answer to one it cannot accept. A browser
// sends `application/x-www-form-urlencoded`: ASCII only, UTF-8 percent-encoded. Anything else
// (a NUL character, which PostgreSQL cannot store; a byte sequence that is not UTF-8; a body over
// the limit or with too many fields; a body that is not a form at all) is refused before any
// handler or the CSRF check reads it, with a 400 that shows the form again and says why. So no
// handler ever sees text it could not store, and nothing a stranger posts reaches a 500.
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { FormBody } from './auth.ts';
import { html } from './html.ts';
import { sendHtml } from './page-kit.ts';
import type { WebScope } from './plugin.ts';

/** The same limit as the JSON API's bodies: a 100,000-character prompt fits, percent-encoded or not. */
export const FORM_BODY_LIMIT_BYTES = 1024 * 1024;
/** Far above the largest form (a task's: its destinations rows, 50 skills, 50 sources, 7 days). */
export const MAX_FORM_FIELDS = 1000;

const PROBLEM = Symbol('form problem');
type ParsedForm = FormBody & { [PROBLEM]?: string };

const MESSAGES = {
  tooLarge: 'The form is larger than 1 MiB. Shorten the longest text and send it again.',
  tooManyFields: `The form has more than ${MAX_FORM_FIELDS.toLocaleString('en-US')} fields.`,
  encoding: 'The form is not validly encoded (UTF-8, percent-encoded). Send it again from this page.',
  nul: 'The form contains a NUL character (U+0000), which cannot be stored. Remove it and send the form again.',
  notAForm: 'The request is not a form (application/x-www-form-urlencoded). Send it from this page.',
};

const refused = (problem: string): ParsedForm => Object.assign(Object.create(null), { [PROBLEM]: problem });

/** Decodes one name or value; undefined when it is not valid percent-encoded UTF-8. */
function decode(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}

/** A urlencoded body as fields (repeated names as arrays), or the reason it is refused. */
export function parseForm(text: string): ParsedForm {
  // A browser percent-encodes every byte above 0x7f, so a body holding one (decoded as UTF-8 or
  // as U+FFFD) is not a form it would send.
  if (/[\u0080-\uffff]/.test(text)) return refused(MESSAGES.encoding);
  const form: ParsedForm = Object.create(null);
  if (text === '') return form;
  let count = 0;
  for (const pair of text.split('&', MAX_FORM_FIELDS + 1)) {
    if (++count > MAX_FORM_FIELDS) return refused(MESSAGES.tooManyFields);
    if (pair === '') continue;
    const at = pair.indexOf('=');
    const name = decode(at < 0 ? pair : pair.slice(0, at));
    const value = decode(at < 0 ? '' : pair.slice(at + 1));
    if (name === undefined || value === undefined) return refused(MESSAGES.encoding);
    if (name.includes('\u0000') || value.includes('\u0000')) return refused(MESSAGES.nul);
    const had = form[name];
    form[name] = had === undefined ? value : [...(Array.isArray(had) ? had : [had]), value];
  }
  return form;
}

/** Why the request's form was refused, or undefined. */
export function formProblem(request: FastifyRequest): string | undefined {
  const body = request.body as ParsedForm | undefined;
  return body && typeof body === 'object' ? body[PROBLEM] : undefined;
}

/**
 * Form bodies only (the JSON API's parsers are removed from the dashboard's scope): every other
 * content type is read, within the limit, and refused.
 */
export async function installFormParsing(scope: WebScope): Promise<void> {
  scope.removeAllContentTypeParsers();
  await scope.register(formbody, { bodyLimit: FORM_BODY_LIMIT_BYTES, parser: parseForm });
  scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: FORM_BODY_LIMIT_BYTES }, (_r, _b, done) =>
    done(null, refused(MESSAGES.notAForm)),
  );
  // A body the framework refuses while reading it (too large, a wrong Content-Length) is bad
  // input too; any other error goes on to the service's error handler.
  scope.setErrorHandler(async (err: FastifyError, request, reply) => {
    if (request.method !== 'POST' || !err.code?.startsWith('FST_ERR_CTP_')) throw err;
    const message = err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? MESSAGES.tooLarge : MESSAGES.encoding;
    return showFormAgain(request, reply, message);
  });
}

/**
 * The page a form is on, by the route it posts to; a route not listed is on its own path's page
 * (sign-in, sign-up, invitations, members, keys, the deletion confirmations).
 */
const FORM_PAGES: Record<string, string> = {
  '/logout': '/dashboard',
  '/dashboard/billing/checkout': '/dashboard/billing',
  '/dashboard/billing/portal': '/dashboard/billing',
  '/dashboard/keys/:id/revoke': '/dashboard/keys',
  '/dashboard/runs/:id/redeliver': '/dashboard/runs/:id',
  '/dashboard/runs/:id/cancel': '/dashboard/runs/:id',
  '/dashboard/runs/:id/replay': '/dashboard/runs/:id',
  '/dashboard/tasks': '/dashboard/tasks/new',
  '/dashboard/tasks/:id': '/dashboard/tasks/:id/edit',
  '/dashboard/tasks/:id/run': '/dashboard/tasks/:id',
  '/dashboard/tasks/:id/status': '/dashboard/tasks/:id',
  '/dashboard/skills': '/dashboard/skills/new',
  '/dashboard/skills/:id': '/dashboard/skills/:id/edit',
  '/dashboard/sources': '/dashboard/sources/new',
  '/dashboard/sources/:id': '/dashboard/sources/:id/edit',
  '/dashboard/sources/:id/test': '/dashboard/sources/:id',
  '/dashboard/sources/:id/connect': '/dashboard/sources/:id',
};

function formPageOf(request: FastifyRequest): string {
  const route = request.routeOptions.url ?? '/dashboard';
  const params = (request.params ?? {}) as Record<string, string>;
  return (FORM_PAGES[route] ?? route).replace(/:(\w+)/g, (_, name: string) =>
    encodeURIComponent(params[name] ?? ''),
  );
}

/**
 * A 400 with the page the form is on, as its GET renders it for this person (through the app
 * itself, so the page is exactly the one they saw), and the reason above it. The values sent are
 * not put back: they could not be read. A page that is not shown to this person (not signed
 * in, not found) is answered as its GET answers.
 */
export async function showFormAgain(request: FastifyRequest, reply: FastifyReply, message: string) {
  const shown = await request.server.inject({
    method: 'GET',
    url: formPageOf(request),
    headers: { cookie: request.headers.cookie ?? '', 'x-request-id': request.id },
    remoteAddress: request.ip,
  });
  const cookies = shown.headers['set-cookie'];
  if (cookies) reply.header('set-cookie', cookies);
  if (shown.statusCode !== 200) {
    if (shown.headers.location) reply.header('location', shown.headers.location);
    const type = String(shown.headers['content-type'] ?? 'text/html; charset=utf-8');
    return reply.code(shown.statusCode).type(type).send(shown.body);
  }
  const flash = html`<div class="flash error" role="alert">${message}</div>`;
  return sendHtml(reply, 400, shown.body.replace('<main id="main">', `<main id="main">${flash.value}`));
}
