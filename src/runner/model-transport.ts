// The HTTP of model calls: one POST over node:http or node:https with keep-alive connections,
// answered when the answer's head arrives, its body read from the socket's stream through the
// byte bound. Not fetch: Node's fetch (undici's, written to the WHATWG specification) spends
// much of a short call on what this one request does not need (request and response objects,
// header lists, web streams): measured with the `openai` SDK against the local model stand-in
// (8 calls at a time, 3,000 calls, a busy 2-core machine), 580-740 us of CPU per call through
// fetch against 440-470 us through node:http, before the SDK itself was left (model-client.ts).
//
// What it does not do, on purpose: it follows no redirect (a provider's API answers where it is
// asked; a 3xx is an error the run reports with its status), sends no cookies and no
// Accept-Encoding (an answer compressed anyway is decompressed: the byte bound applies to what
// is read, capped-response.ts), and uses no HTTP proxy (docs/operations.md).
import type http from 'node:http';
import type https from 'node:https';
import { pipeline, type Readable } from 'node:stream';
import type Zlib from 'node:zlib';
import { byteBound, isEventStream, tooLargeError } from './capped-response.ts';

/** Statuses whose answer has no body. */
const NULL_BODY_STATUS = new Set([101, 103, 204, 205, 304]);

/** A request whose answer did not start within its time (retried, as a lost connection is). */
export class ModelTimeoutError extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`);
    this.name = 'ModelTimeoutError';
  }
}

/** An answer's head and its body as it is read (null for a status without one). */
export interface ModelHttpAnswer {
  status: number;
  /** As Node parsed them: names in lower case, repeated ones joined with ", ". */
  headers: http.IncomingHttpHeaders;
  /**
   * The body's chunks, counted against the bound (per event for an event stream, in all
   * otherwise): past it the transfer is ended and the read fails with a ResponseTooLargeError.
   * Given up (`return()`: a reader that stops early, a retried error's body never read), it ends
   * the transfer, so the connection is not left holding an unread answer.
   */
  body: AsyncIterableIterator<Uint8Array> | null;
}

export interface ModelPost {
  url: URL;
  headers: Record<string, string>;
  body: string;
  /** The wait for the answer's head; past it the request fails with ModelTimeoutError. */
  timeoutMs: number;
  /** Aborts the request, or the body's read, with the signal's reason as the error. */
  signal: AbortSignal;
}

export interface ModelTransport {
  post(request: ModelPost): Promise<ModelHttpAnswer>;
}

export interface ModelTransportOptions {
  /** The bound of an answer's body: per event for an event stream, in all otherwise (capped-response.ts). */
  maxBodyBytes: number;
}

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

/** The whole body of an answer as text (an error's), within the answer's bound. */
export async function answerText(answer: ModelHttpAnswer): Promise<string> {
  const parts: Uint8Array[] = [];
  if (answer.body) for await (const chunk of answer.body) parts.push(chunk);
  return Buffer.concat(parts).toString('utf8');
}

/** The error a request or body read ends with when its signal aborts. */
function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new DOMException('This operation was aborted', 'AbortError');
}

/** A transport with its own keep-alive connections (one pool per client, a socket per call in flight). */
export function modelTransport(o: ModelTransportOptions): ModelTransport {
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
  return {
    post(request) {
      const via = connection(request.url.protocol);
      if (!via)
        return Promise.reject(new TypeError(`the model transport cannot reach ${request.url.protocol} URLs`));
      return send(request, via, o.maxBodyBytes);
    },
  };
}

/** One request over `via`, answered when the answer's head has arrived. */
function send(
  { url, headers, body, timeoutMs, signal }: ModelPost,
  via: { client: typeof http | typeof https; agent: http.Agent },
  maxBodyBytes: number,
): Promise<ModelHttpAnswer> {
  return new Promise<ModelHttpAnswer>((resolve, reject) => {
    if (signal.aborted) return reject(abortError(signal));
    const req = via.client.request(url, { method: 'POST', headers, agent: via.agent });
    let answer: http.IncomingMessage | undefined;
    const timer = setTimeout(() => req.destroy(new ModelTimeoutError(timeoutMs)), timeoutMs);
    const onAbort = () => {
      const err = abortError(signal);
      req.destroy(err);
      answer?.destroy(err);
      reject(err);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    };
    req.on('error', (err) => {
      done();
      reject(err);
    });
    req.on('response', (res) => {
      // The time bounds the wait for the answer to start, not its length.
      clearTimeout(timer);
      answer = res;
      res.on('close', done);
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 599) {
        // An informational status: no usable answer.
        res.destroy();
        reject(new TypeError(`the model provider answered with HTTP status ${status}`));
        return;
      }
      if (NULL_BODY_STATUS.has(status)) {
        res.resume();
        resolve({ status, headers: res.headers, body: null });
        return;
      }
      const perEvent = isEventStream(res.headers['content-type']);
      resolve({ status, headers: res.headers, body: boundedBody(decompressed(res), maxBodyBytes, perEvent) });
    });
    req.end(body);
  });
}
