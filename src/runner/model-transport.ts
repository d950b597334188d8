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
//
// Its answer is not a Response but what the SDK reads of one (ModelAnswer below): a Response's
// body is a web stream, and one made over the socket's Node stream, then one more for the byte
// bound, cost the worker about a tenth of its CPU per run (peers bench driver, instant model,
// concurrency 32, 3,000 runs, 3 alternated pairs: 0.87/0.98/1.00 ms against 1.05/1.15/1.06).
import type http from 'node:http';
import type https from 'node:https';
import { pipeline, type Readable } from 'node:stream';
import type Zlib from 'node:zlib';
import { byteBound, isEventStream, tooLargeError } from './capped-response.ts';

type Fetch = (url: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Statuses whose answer has no body. */
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

/**
 * An answer's headers as the SDK reads them (get, has, entries and the rest of Headers' reading
 * methods), over the header object Node parsed, without copying it into a Headers: the SDK
 * lists every answer's headers (`entries()`, to find x-request-id) and formats them for its
 * debug log whether or not that log is on, and a Headers is built header by header and sorts
 * its names at each listing. Node gives the names in lower case and repeated headers joined
 * with ", " (set-cookie as a list), as Headers.get does; they are listed in the order they
 * came, not sorted (the SDK looks names up).
 */
export class AnswerHeaders {
  readonly #fields: http.IncomingHttpHeaders;

  constructor(fields: http.IncomingHttpHeaders) {
    this.#fields = fields;
  }

  get(name: string): string | null {
    const v = this.#fields[name.toLowerCase()];
    if (v === undefined) return null;
    return Array.isArray(v) ? v.join(', ') : v;
  }

  has(name: string): boolean {
    return this.#fields[name.toLowerCase()] !== undefined;
  }

  getSetCookie(): string[] {
    const v = this.#fields['set-cookie'];
    return v === undefined ? [] : Array.isArray(v) ? [...v] : [v];
  }

  *entries(): IterableIterator<[string, string]> {
    for (const [name, v] of Object.entries(this.#fields)) {
      if (v === undefined) continue;
      // As a Headers lists them: each cookie on its own, other repeated headers joined.
      if (name === 'set-cookie' && Array.isArray(v)) for (const cookie of v) yield [name, cookie];
      else yield [name, Array.isArray(v) ? v.join(', ') : v];
    }
  }

  *keys(): IterableIterator<string> {
    for (const [name] of this.entries()) yield name;
  }

  *values(): IterableIterator<string> {
    for (const [, value] of this.entries()) yield value;
  }

  forEach(fn: (value: string, name: string, headers: AnswerHeaders) => void): void {
    for (const [name, value] of this.entries()) fn(value, name, this);
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }
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

/** The chunks of `source`, counted against the bound; past it the transfer is ended. */
async function* boundedChunks(
  source: Readable,
  maxBytes: number,
  perEvent: boolean,
): AsyncGenerator<Uint8Array> {
  const within = byteBound(maxBytes, perEvent);
  for await (const chunk of source as AsyncIterable<Uint8Array>) {
    if (!within(chunk)) {
      const err = tooLargeError(perEvent, maxBytes);
      source.destroy(err);
      throw err;
    }
    yield chunk;
  }
}

/**
 * The body of an answer as it is read: its chunks, counted against the bound (per event for an
 * event stream, in all otherwise); past it the transfer is ended and the read fails with a
 * ResponseTooLargeError. A body given up (`return()`: a reader that stops early, or the SDK
 * cancelling the body of an answer it retries, maybe before reading any of it) ends the
 * transfer too, so its connection is not left holding an unread answer.
 */
function boundedBody(
  source: Readable,
  maxBytes: number,
  perEvent: boolean,
): AsyncIterableIterator<Uint8Array> {
  const chunks = boundedChunks(source, maxBytes, perEvent);
  return {
    next: () => chunks.next(),
    return: async () => {
      source.destroy();
      return chunks.return(undefined);
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/**
 * An answer as the `openai` SDK reads one (its internal/shims.mjs and parse.mjs): `ok`,
 * `status`, `statusText`, `url`, `headers`, and `body` as an async iterable of bytes, which it
 * iterates as it is; `text()` and `json()` read the whole body (an error's). Not a Response:
 * see the head of this file. The run tests read answers of every kind through the SDK with it
 * (test/run-execution.test.ts; retried errors in test/worker.test.ts, bounds in
 * test/adversarial/output-bounds.test.ts).
 */
class ModelAnswer {
  readonly ok: boolean;
  readonly status: number;
  readonly statusText: string;
  readonly url: string;
  readonly headers: AnswerHeaders;
  readonly body: AsyncIterable<Uint8Array> | null;

  constructor(res: http.IncomingMessage, url: URL, maxBytes: number) {
    this.status = res.statusCode ?? 0;
    this.ok = this.status >= 200 && this.status <= 299;
    this.statusText = res.statusMessage ?? '';
    this.url = url.href;
    this.headers = new AnswerHeaders(res.headers);
    if (NULL_BODY_STATUS.has(this.status)) {
      res.resume();
      this.body = null;
    } else {
      const perEvent = isEventStream(this.headers.get('content-type'));
      this.body = boundedBody(decompressed(res), maxBytes, perEvent);
    }
  }

  async text(): Promise<string> {
    const parts: Uint8Array[] = [];
    if (this.body) for await (const chunk of this.body) parts.push(chunk);
    return Buffer.concat(parts).toString('utf8');
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }
}

export interface ModelTransportOptions {
  /** The bound of an answer's body: per event for an event stream, in all otherwise (capped-response.ts). */
  maxBodyBytes: number;
}

/**
 * A fetch for model calls, with its own keep-alive connections (one pool per client, as many
 * sockets as calls in flight). An abort ends the request, or the answer's body mid-read, with
 * an `AbortError`, as fetch does: the SDK then ends a streamed answer quietly, keeping what
 * arrived (its usage included).
 */
export function modelTransport(o: ModelTransportOptions): Fetch {
  loadHeadersClass();
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
    return send(url, via, init, o.maxBodyBytes);
  };
}

/**
 * Loads now the class every request has its headers in (the SDK builds them; an answer's are
 * AnswerHeaders): Node loads its fetch classes (undici's Headers) at their first use, which
 * would otherwise be the first run's model call, on its way to the provider (about 30 ms
 * measured: docs/architecture.md, "Lazy roles"), for memory that call takes anyway. A client is
 * made when its worker starts (runner/model-client.ts).
 */
function loadHeadersClass(): void {
  void new Headers();
}

/** One request over `via`, answered when the answer's head has arrived. */
function send(
  url: URL,
  via: { client: typeof http | typeof https; agent: http.Agent },
  init: RequestInit | undefined,
  maxBodyBytes: number,
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
    // The SDK sends a Headers already: read as it is, not copied into another.
    const given = init?.headers;
    (given instanceof Headers ? given : new Headers(given)).forEach((value, name) => {
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
      if (status < 200 || status > 599) {
        // A status fetch would not answer with (an informational one): no usable answer.
        res.destroy();
        reject(new TypeError(`the model provider answered with HTTP status ${status}`));
        return;
      }
      // What the SDK reads of a Response, and all it reads (ModelAnswer).
      resolve(new ModelAnswer(res, url, maxBodyBytes) as unknown as Response);
    });
    req.end(body);
  });
}
