// The HTTP transport of model calls: a fetch-shaped function over node:http and node:https with
// keep-alive connections, given to the `openai` SDK in place of the global fetch. A model call
// is one POST whose answer is streamed back, and Node's fetch (undici's, written to the WHATWG
// specification) spends much of a short call on what this one request does not need: measured
// with the SDK against the local model stand-in (8 calls at a time, 3,000 calls, a busy 2-core
// machine), 580-740 us of CPU per call through fetch against 440-470 us through this transport.
//
// What it does not do that fetch does, on purpose: it follows no redirect (a provider's API
// answers where it is asked; a 3xx is an error the run reports with its status), sends no
// cookies and no Accept-Encoding (an answer compressed anyway is decompressed: the byte bound
// applies to what is read, capped-response.ts). It takes what the SDK sends for a chat
// completion: a string or byte body, or none; any other body is refused with a clear error.
import type http from 'node:http';
import type https from 'node:https';
import { pipeline, Readable } from 'node:stream';
import type Zlib from 'node:zlib';

type Fetch = (url: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Statuses whose answer has no body (a Response refuses one). */
const NULL_BODY_STATUS = new Set([101, 103, 204, 205, 304]);

/** The decoder of an answer's Content-Encoding; undefined: none, or one this does not decode. */
function decoderFor(encoding: string): Zlib.Gunzip | Zlib.Inflate | Zlib.BrotliDecompress | undefined {
  if (!['gzip', 'x-gzip', 'deflate', 'br'].includes(encoding)) return undefined;
  // Loaded when an answer needs it (none does unless asked): an idle worker does without.
  const zlib = process.getBuiltinModule('node:zlib') as typeof Zlib;
  if (encoding === 'deflate') return zlib.createInflate();
  return encoding === 'br' ? zlib.createBrotliDecompress() : zlib.createGunzip();
}

/** The answer's body as sent, or decompressed (an error or abort of the answer reaches it). */
function decompressed(res: http.IncomingMessage): Readable {
  const decoder = decoderFor(String(res.headers['content-encoding'] ?? '').toLowerCase());
  // pipeline destroys the decoder with the answer's error: the reader sees it there.
  return decoder ? pipeline(res, decoder, () => undefined) : res;
}

function headersOf(res: http.IncomingMessage): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return headers;
}

function bodyOf(init: RequestInit | undefined): string | Uint8Array | undefined {
  const body = init?.body;
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string' || body instanceof Uint8Array) return body;
  throw new TypeError('the model transport sends only text or byte bodies');
}

/** The error a request or body read ends with when its signal aborts (what fetch rejects with). */
function abortError(signal: AbortSignal): unknown {
  const reason: unknown = signal.reason;
  return reason instanceof Error && reason.name === 'AbortError'
    ? reason
    : new DOMException('This operation was aborted', 'AbortError');
}

/**
 * A fetch for model calls, with its own keep-alive connections (one pool per client, as many
 * sockets as calls in flight). An abort ends the request, or the answer's body mid-read, with
 * an `AbortError`, as fetch does: the SDK then ends a streamed answer quietly, keeping what
 * arrived (its usage included).
 */
export function modelTransport(): Fetch {
  loadAnswerClasses();
  // Taken with getBuiltinModule rather than an ESM import: importing node:http as a module reads
  // every one of its exports, whose lazy ones (WebSocket and others) load Node's fetch
  // implementation, TLS and HTTP/2 at start, about 1.5 MB of an idle worker's memory.
  const client = process.getBuiltinModule('node:http') as typeof http;
  const plain = { client, agent: new client.Agent({ keepAlive: true }) };
  // node:https (with TLS) is loaded at the first https call: a worker whose provider is reached
  // over plain HTTP (a local model server) does without its memory.
  let secure: { client: typeof https; agent: https.Agent } | undefined;
  const connection = (protocol: string) => {
    if (protocol === 'http:') return plain;
    if (protocol !== 'https:') return undefined;
    if (!secure) {
      const client = process.getBuiltinModule('node:https') as typeof https;
      secure = { client, agent: new client.Agent({ keepAlive: true }) };
    }
    return secure;
  };
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const via = connection(url.protocol);
    if (!via) throw new TypeError(`the model transport cannot reach ${url.protocol} URLs`);
    return send(url, via, init);
  };
}

/**
 * Loads now the classes the first answer is made of: Node loads its fetch classes (Headers,
 * Response: undici's) and web streams at their first use, which would otherwise be the first
 * run's model call, on its way to the provider (about 30 ms measured: docs/benchmarks.md,
 * "Peers"), for memory that call takes anyway (about 2.5 MB). A client is made when its worker
 * starts (runner/model-client.ts).
 */
function loadAnswerClasses(): void {
  void new Response(Readable.toWeb(Readable.from([])) as ReadableStream<Uint8Array>, {
    headers: new Headers(),
  });
}

/** One request over `via`, answered when the answer's head has arrived. */
function send(
  url: URL,
  via: { client: typeof http | typeof https; agent: http.Agent },
  init: RequestInit | undefined,
): Promise<Response> {
  return new Promise<Response>((resolve, reject) => {
    const signal = init?.signal ?? undefined;
    if (signal?.aborted) return reject(abortError(signal));
    let body: string | Uint8Array | undefined;
    try {
      body = bodyOf(init);
    } catch (err) {
      return reject(err);
    }
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const req = via.client.request(url, { method: init?.method ?? 'GET', headers, agent: via.agent });
    let answer: http.IncomingMessage | undefined;
    const onAbort = () => {
      if (!signal) return;
      const err = abortError(signal);
      req.destroy(err as Error);
      answer?.destroy(err as Error);
      reject(err);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const done = () => signal?.removeEventListener('abort', onAbort);
    req.on('error', (err) => {
      done();
      reject(err);
    });
    req.on('response', (res) => {
      answer = res;
      res.on('close', done);
      const status = res.statusCode ?? 0;
      try {
        if (NULL_BODY_STATUS.has(status)) {
          res.resume();
          resolve(new Response(null, { status, statusText: res.statusMessage, headers: headersOf(res) }));
          return;
        }
        const stream = Readable.toWeb(decompressed(res)) as ReadableStream<Uint8Array>;
        resolve(new Response(stream, { status, statusText: res.statusMessage, headers: headersOf(res) }));
      } catch (err) {
        // A status a Response cannot carry (under 200 or over 599): no usable answer.
        res.destroy();
        reject(new TypeError(`the model provider answered with HTTP status ${status}`, { cause: err }));
      }
    });
    req.end(body);
  });
}
