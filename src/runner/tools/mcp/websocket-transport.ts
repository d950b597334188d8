// An MCP client transport over WebSocket that can send handshake headers. The SDK's
// WebSocketClientTransport cannot, which would make bearer and header auth impossible; this
// one opens the socket through the SSRF guard (openOutboundWebSocket) with the auth headers.
import { randomBytes } from 'node:crypto';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Dispatcher } from 'undici';
import { type OutboundPolicy, openOutboundWebSocket, outboundDispatcher } from '../../../lib/outbound.ts';
import { formatBytes } from '../../capped-response.ts';
import { MAX_MCP_MESSAGE_BYTES } from '../tool-bounds.ts';

const SUBPROTOCOL = 'mcp';
const PROBE_TIMEOUT_MS = 5000;

export interface WebSocketTransportOptions {
  /** The ws(s) URL, query auth already applied. */
  url: URL;
  policy: OutboundPolicy;
  headers: Record<string, string>;
  /** An incoming message larger than this closes the connection. */
  maxMessageBytes?: number;
}

/** What the diagnostic handshake learned: the HTTP status of the answer, or the error of the attempt. */
export type HandshakeProbe = { status: number } | { error: Error };

/** The handshake failed; `probe` says why, as far as could be learned. */
export class WebSocketHandshakeError extends Error {
  readonly probe: HandshakeProbe;
  constructor(message: string, probe: HandshakeProbe) {
    super(message);
    this.name = 'WebSocketHandshakeError';
    this.probe = probe;
  }
}

/**
 * undici's WebSocket reports a failed handshake as a bare error event, without the HTTP status
 * (401 and a refused port look the same). After such a failure this repeats the upgrade
 * request once through the same guarded dispatcher, only to learn the status or network error.
 */
export function probeHandshake(
  url: URL,
  policy: OutboundPolicy,
  headers: Record<string, string>,
): Promise<HandshakeProbe> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (probe: HandshakeProbe) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(probe);
    };
    const timer = setTimeout(
      () => done({ error: new Error('no answer to the handshake') }),
      PROBE_TIMEOUT_MS,
    );
    const handler: Dispatcher.DispatchHandler = {
      // Its presence marks the handler as one of undici's new-style handlers.
      onRequestStart() {},
      onRequestUpgrade(_controller, statusCode, _headers, socket) {
        socket.destroy();
        done({ status: statusCode });
      },
      onResponseStart(controller, statusCode) {
        done({ status: statusCode });
        controller.abort(new Error('handshake probe done'));
      },
      onResponseData() {},
      onResponseEnd() {},
      onResponseError(_controller, error) {
        done({ error });
      },
    };
    outboundDispatcher(policy)
      .then((dispatcher) =>
        dispatcher.dispatch(
          {
            origin: `${url.protocol === 'wss:' ? 'https:' : 'http:'}//${url.host}`,
            path: `${url.pathname}${url.search}`,
            method: 'GET',
            upgrade: 'websocket',
            headers: {
              ...headers,
              'sec-websocket-key': randomBytes(16).toString('base64'),
              'sec-websocket-version': '13',
              'sec-websocket-protocol': SUBPROTOCOL,
            },
          },
          handler,
        ),
      )
      .catch((err: unknown) => done({ error: err instanceof Error ? err : new Error(String(err)) }));
  });
}

export class WebSocketMcpTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;

  readonly #options: WebSocketTransportOptions;
  #socket: WebSocket | undefined;
  #notifiedClose = false;
  #failure: Error | undefined;

  constructor(options: WebSocketTransportOptions) {
    this.#options = options;
  }

  /** Why the transport gave up on the server (a message past the size bound). */
  get failure(): Error | undefined {
    return this.#failure;
  }

  async start(): Promise<void> {
    if (this.#socket) throw new Error('the websocket transport is already started');
    const { url, policy, headers } = this.#options;
    // Throws OutboundUrlError for a URL the policy refuses, before any connection.
    const socket = await openOutboundWebSocket(url.href, policy, { protocols: [SUBPROTOCOL], headers });
    this.#socket = socket;
    socket.binaryType = 'arraybuffer';
    const opened = await new Promise<boolean>((resolve) => {
      // It can have failed already (undici refuses some ports at once, fetch's "bad ports").
      if (socket.readyState === socket.CLOSED) return resolve(false);
      if (socket.readyState === socket.OPEN) return resolve(true);
      socket.addEventListener('open', () => resolve(true), { once: true });
      socket.addEventListener('close', () => resolve(false), { once: true });
    });
    if (!opened) {
      const probe = await probeHandshake(url, policy, headers);
      const why = 'status' in probe ? `HTTP ${probe.status}` : probe.error.message;
      throw new WebSocketHandshakeError(`the WebSocket handshake failed (${why})`, probe);
    }
    socket.addEventListener('message', (event) => this.#onMessage(event.data));
    socket.addEventListener('error', () => this.onerror?.(new Error('websocket error')));
    socket.addEventListener('close', () => this.#notifyClose());
  }

  send(message: JSONRPCMessage): Promise<void> {
    const socket = this.#socket;
    if (!socket || socket.readyState !== socket.OPEN)
      return Promise.reject(new Error('the websocket is not open'));
    socket.send(JSON.stringify(message));
    return Promise.resolve();
  }

  /** Idempotent; does not wait for the server's close frame. */
  async close(): Promise<void> {
    const socket = this.#socket;
    if (socket && socket.readyState !== socket.CLOSED && socket.readyState !== socket.CLOSING)
      socket.close(1000);
    this.#notifyClose();
  }

  #onMessage(data: unknown): void {
    const max = this.#options.maxMessageBytes ?? MAX_MCP_MESSAGE_BYTES;
    const size =
      typeof data === 'string'
        ? Buffer.byteLength(data)
        : data instanceof ArrayBuffer
          ? data.byteLength
          : Number.NaN;
    if (!(size <= max)) {
      this.#failure = new Error(`the server sent a message larger than ${formatBytes(max)}`);
      this.onerror?.(this.#failure);
      this.#socket?.close(1000, 'message too big');
      this.#notifyClose();
      return;
    }
    try {
      const text = typeof data === 'string' ? data : Buffer.from(data as ArrayBuffer).toString('utf8');
      this.onmessage?.(JSONRPCMessageSchema.parse(JSON.parse(text)));
    } catch (err) {
      // Not JSON-RPC: reported, not fatal (as the SDK's transports do).
      this.onerror?.(err instanceof Error ? err : new Error(String(err)));
    }
  }

  #notifyClose(): void {
    if (this.#notifiedClose) return;
    this.#notifiedClose = true;
    this.onclose?.();
  }
}
