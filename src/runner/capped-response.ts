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
  const counter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      if (perEvent) {
        // Bytes since the last blank line ("\n\n", "\r\n\r\n" or "\r\r").
        for (let i = 0; i < chunk.length; i++) {
          const b = chunk[i] as number;
          const boundary =
            (b === LF && (prev1 === LF || (prev1 === CR && prev2 === LF))) || (b === CR && prev1 === CR);
          size = boundary ? 0 : size + 1;
          prev2 = prev1;
          prev1 = b;
          if (size > maxBytes) break;
        }
      } else size += chunk.length;
      if (size > maxBytes) {
        const err = new ResponseTooLargeError(perEvent ? 'one event of the answer' : 'the answer', maxBytes);
        onLimit?.(err);
        controller.error(err);
        return;
      }
      controller.enqueue(chunk);
    },
  });
  return new Response(response.body.pipeThrough(counter), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
