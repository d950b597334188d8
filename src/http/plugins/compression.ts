// Compression of JSON answers (gzip or br, as the request's Accept-Encoding prefers), once they
// are large enough for it to pay: below the threshold the bytes saved do not cover the work.
// Request bodies are never decompressed: a compressed body is not JSON, so it is a 400, and
// nothing a client sends can expand in memory.
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';
import type { App } from '../types.ts';

/** JSON answers of at least this many bytes are compressed when the client accepts it. */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

type Coding = 'br' | 'gzip';

const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);

/** Codings listed in an Accept-Encoding header that are read; a longer list is cut there. */
const MAX_CODINGS = 32;

/**
 * The coding to answer with: br or gzip by their q-values (RFC 9110 12.5.3; `*` stands for an
 * unlisted one, q=0 refuses), br on a tie; undefined for the identity.
 */
export function chooseCoding(header: string | undefined): Coding | undefined {
  if (!header) return undefined;
  const weights = new Map<string, number>();
  for (const part of header.split(',', MAX_CODINGS)) {
    const [name = '', ...params] = part.trim().toLowerCase().split(';');
    let weight = 1;
    for (const param of params) {
      const q = /^\s*q\s*=\s*([0-9.]{1,5})\s*$/.exec(param);
      if (q) weight = Number(q[1]);
    }
    if (name) weights.set(name.trim(), Number.isFinite(weight) ? weight : 0);
  }
  const weight = (coding: string) => weights.get(coding) ?? weights.get('*') ?? 0;
  const br = weight('br');
  const gz = Math.max(weight('gzip'), weights.get('x-gzip') ?? 0);
  if (br <= 0 && gz <= 0) return undefined;
  return br >= gz ? 'br' : 'gzip';
}

function withVary(current: unknown): string {
  // Most answers carry no Vary of their own.
  if (current === undefined) return 'Accept-Encoding';
  const values = String(current)
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
  if (values.some((v) => v === '*' || v.toLowerCase() === 'accept-encoding')) return values.join(', ');
  return [...values, 'Accept-Encoding'].join(', ');
}

function compress(coding: Coding, body: Buffer): Promise<Buffer> {
  if (coding === 'gzip') return gzipped(body, { level: 6 });
  // Quality 4: most of brotli's gain at a fraction of the default (11)'s time.
  return brotli(body, {
    params: { [constants.BROTLI_PARAM_QUALITY]: 4, [constants.BROTLI_PARAM_SIZE_HINT]: body.length },
  });
}

export function installCompression(app: App): void {
  // A callback, not an async function: most answers go out as they are, and those should not
  // pay for a promise (see app.ts).
  app.addHook('onSend', (request, reply, payload, done) => {
    if (!String(reply.getHeader('content-type') ?? '').startsWith('application/json'))
      return done(null, payload);
    // Every JSON answer may come compressed, so caches must key on Accept-Encoding.
    reply.header('vary', withVary(reply.getHeader('vary')));
    if (request.method === 'HEAD' || reply.hasHeader('content-encoding')) return done(null, payload);
    if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return done(null, payload);
    // The coding first: a client that accepts none costs no copy of the answer into bytes.
    const coding = chooseCoding(request.headers['accept-encoding']);
    if (!coding) return done(null, payload);
    const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
    if (body.length < COMPRESSION_THRESHOLD_BYTES) return done(null, payload);
    compress(coding, body).then(
      (compressed) => {
        reply.header('content-encoding', coding);
        reply.removeHeader('content-length');
        done(null, compressed);
      },
      (err: Error) => done(err),
    );
  });
}
