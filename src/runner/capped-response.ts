// Bounds what a remote server's answer can make this process hold. The SDKs that read model
// and MCP answers buffer a whole JSON body, and an event stream's event until its blank line,
// before parsing it; without a bound, one endless line from a provider or an MCP server would
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

/**
 * The response with a body that errors once it exceeds `maxBytes`: in all for an ordinary body,
 * per event for an event stream (a long-lived stream may carry any number of events, each
 * parsed and let go). `onLimit` learns of it first, so the owner can tell why its read failed.
 */
export function capResponse(
  response: Response,
  maxBytes: number,
  onLimit?: (err: ResponseTooLargeError) => void,
): Response {
  // These statuses cannot be rebuilt with a body, and carry none that matters.
  if (!response.body || [101, 204, 205, 304].includes(response.status)) return response;
  const perEvent = /^text\/event-stream\b/i.test(response.headers.get('content-type') ?? '');
  let size = 0;
  // The last bytes of the previous chunk: an event boundary (a blank line) may span two chunks.
  let prev1 = -1;
  let prev2 = -1;
  /** Counts `chunk`; false once the bound is passed. */
  const within = (chunk: Uint8Array): boolean => {
    if (!perEvent) {
      size += chunk.length;
      return size <= maxBytes;
    }
    // Bytes since the last blank line ("\n\n", "\r\n\r\n" or "\r\r").
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
  // A stream that reads the body as its reader asks (pull), rather than piping it through a
  // TransformStream: the pipe's machinery cost 50-100 µs of CPU per model answer (measured:
  // 2,000 streamed answers of the bench's model stand-in through the SDK, 8 at a time), about a
  // tenth of what a run costs the worker. An error of the body (an aborted request) becomes the
  // stream's; cancelling the stream cancels the body.
  const reader = response.body.getReader();
  const counted = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      if (within(value)) {
        controller.enqueue(value);
        return;
      }
      const err = new ResponseTooLargeError(perEvent ? 'one event of the answer' : 'the answer', maxBytes);
      onLimit?.(err);
      controller.error(err);
      await reader.cancel(err).catch(() => undefined);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(counted, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
