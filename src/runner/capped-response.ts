// Bounds what a remote server's answer can make this process hold. The model client and the
// MCP SDK buffer a whole JSON body, and an event stream's event until its blank line, before
// parsing it; without a bound, one endless line from a provider or an MCP server would
// grow until the process ran out of memory. The body is counted as it is read and fails with
// ResponseTooLargeError past the limit, which also cancels the rest of the transfer.

export class ResponseTooLargeError extends Error {
  readonly maxBytes: number;
  constructor(what: string, maxBytes: number) {
    super(`${what} was larger than ${formatBytes(maxBytes)}`);
    this.name = 'ResponseTooLargeError';
    this.maxBytes = maxBytes;
  }
}

/** "4 MiB", "512 KiB", "100 bytes": limits as the docs state them. */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / 1024 / 1024} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/** Whether `err` or one of its causes is a ResponseTooLargeError. */
export function tooLargeIn(err: unknown): ResponseTooLargeError | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++)
    if (e instanceof ResponseTooLargeError) return e;
  return undefined;
}

const LF = 0x0a;
const CR = 0x0d;

/** Whether an answer of `contentType` is an event stream (bounded per event, not in all). */
export function isEventStream(contentType: string | null | undefined): boolean {
  return /^text\/event-stream\b/i.test(contentType ?? '');
}

/**
 * A counter of a body's bytes against `maxBytes`: in all for an ordinary body, per event for an
 * event stream (the bytes since the last blank line: "\n\n", "\r\n\r\n" or "\r\r", which may
 * span two chunks). Each call counts the next chunk and says whether the bound still holds.
 */
export function byteBound(maxBytes: number, perEvent: boolean): (chunk: Uint8Array) => boolean {
  let size = 0;
  // The last bytes of the previous chunk.
  let prev1 = -1;
  let prev2 = -1;
  return (chunk) => {
    if (!perEvent) {
      size += chunk.length;
      return size <= maxBytes;
    }
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i] as number;
      const boundary =
        (b === LF && (prev1 === LF || (prev1 === CR && prev2 === LF))) || (b === CR && prev1 === CR);
      size = boundary ? 0 : size + 1;
      prev2 = prev1;
      prev1 = b;
      if (size > maxBytes) return false;
    }
    return true;
  };
}

/** The error of a body past its bound. */
export function tooLargeError(perEvent: boolean, maxBytes: number): ResponseTooLargeError {
  return new ResponseTooLargeError(perEvent ? 'one event of the answer' : 'the answer', maxBytes);
}

/**
 * The response with a body that errors once it exceeds `maxBytes`: in all for an ordinary body,
 * per event for an event stream (a long-lived stream may carry any number of events, each
 * parsed and let go). `onLimit` learns of it first, so the owner can tell why its read failed.
 *
 * The body is a stream that reads the original one chunk at a time as it is read itself (no
 * buffering ahead: the reader's pace is the transfer's). Not `pipeThrough` a TransformStream:
 * setting up a pipe (a writable side, a transform, the pipe's own promises) cost the worker
 * about 50 µs per model answer when model answers were bounded here, measured with the peers
 * bench's throughput driver (CPU profile of the worker at concurrency 8: 3.3% of its busy time
 * in this function). Model answers are now bounded on the socket's stream, without a web
 * stream (model-transport.ts, with byteBound); MCP and OAuth answers, which come from fetch,
 * here.
 */
export function capResponse(
  response: Response,
  maxBytes: number,
  onLimit?: (err: ResponseTooLargeError) => void,
): Response {
  // These statuses cannot be rebuilt with a body, and carry none that matters.
  if (!response.body || [101, 204, 205, 304].includes(response.status)) return response;
  const perEvent = isEventStream(response.headers.get('content-type'));
  const reader = response.body.getReader();
  const within = byteBound(maxBytes, perEvent);
  const body = new ReadableStream<Uint8Array>(
    {
      // A read of the source that fails (the connection lost, the request aborted) rejects
      // here, and this body fails with the same error.
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        if (within(value)) return controller.enqueue(value);
        const err = tooLargeError(perEvent, maxBytes);
        onLimit?.(err);
        controller.error(err);
        // The rest of the transfer is not wanted.
        await reader.cancel(err).catch(() => undefined);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
