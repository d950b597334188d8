// MCP servers for the source tests: the reference server (server-everything) over stdio, SSE
// and Streamable HTTP, a server of our own (built with the official SDK) over WebSocket, and a
// stdio server that reports its process ids.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { createConnection, createServer as createNetServer } from 'node:net';
import { dirname, join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import { WebSocketServer, type WebSocket as WsSocket } from 'ws';
import { z } from 'zod';

const require = createRequire(import.meta.url);

/**
 * Answers one HTTP request with a fresh, stateless MCP server (the official SDK's Streamable
 * HTTP transport): `server` is made for this request and closed with it.
 */
export async function answerStatelessMcp(
  server: { connect(transport: Transport): Promise<void>; close(): Promise<void> },
  req: IncomingMessage,
  res: ServerResponse,
  body: string,
  options: { json: boolean },
): Promise<void> {
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: options.json,
  });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, JSON.parse(body));
}

/** dist/index.js of @modelcontextprotocol/server-everything (its argument: stdio, sse or streamableHttp). */
export const everythingServerPath = join(
  dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')),
  'dist',
  'index.js',
);

export async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
  await exited;
  clearTimeout(timer);
}

/**
 * server-everything over HTTP on a free port. `streamableHttp` serves /mcp; `sse` is a server
 * of the older HTTP+SSE transport only (GET /sse, POST /message), for the fallback.
 */
export async function startEverythingHttp(
  mode: 'streamableHttp' | 'sse' = 'streamableHttp',
): Promise<{ url: string; close(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(process.execPath, [everythingServerPath, mode], {
    env: { PATH: process.env.PATH ?? '', PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d) => {
    stderr = `${stderr}${d}`.slice(-4000);
  });
  const deadline = Date.now() + 20_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stopChild(child);
      throw new Error(`server-everything (${mode}) did not start on port ${port}: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `http://127.0.0.1:${port}/${mode === 'sse' ? 'sse' : 'mcp'}`,
    close: () => stopChild(child),
  };
}

/** The server side of MCP over one accepted WebSocket (text frames of JSON-RPC). */
export class WsServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;
  readonly #socket: WsSocket;
  constructor(socket: WsSocket) {
    this.#socket = socket;
  }
  async start(): Promise<void> {
    this.#socket.on('message', (data) => {
      try {
        this.onmessage?.(JSONRPCMessageSchema.parse(JSON.parse(String(data))));
      } catch (err) {
        this.onerror?.(err as Error);
      }
    });
    this.#socket.on('close', () => this.onclose?.());
  }
  async send(message: JSONRPCMessage): Promise<void> {
    this.#socket.send(JSON.stringify(message));
  }
  async close(): Promise<void> {
    this.#socket.close();
  }
}

function buildWsServer(authorization: string | undefined): McpServer {
  const server = new McpServer({ name: 'ws-test', version: '1.0.0' });
  server.registerTool(
    'add',
    { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }),
  );
  server.registerTool('whoami', { description: 'The Authorization header of the handshake' }, async () => ({
    content: [{ type: 'text', text: authorization ?? '(none)' }],
  }));
  return server;
}

/**
 * An MCP server over WebSocket (subprotocol mcp) on 127.0.0.1. Every upgrade request's headers
 * are recorded in `handshakes`; with `requiredBearer`, an upgrade without
 * `Authorization: Bearer <requiredBearer>` is answered 401.
 */
export async function startWebSocketMcpServer(options: { requiredBearer?: string } = {}): Promise<{
  url: string;
  close(): Promise<void>;
  handshakes: Array<Record<string, string | string[] | undefined>>;
}> {
  const handshakes: Array<Record<string, string | string[] | undefined>> = [];
  const http = createServer((_req, res) => res.writeHead(426).end());
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => (protocols.has('mcp') ? 'mcp' : false),
  });
  http.on('upgrade', (req, socket, head) => {
    handshakes.push({ ...req.headers });
    const { requiredBearer } = options;
    if (requiredBearer !== undefined && req.headers.authorization !== `Bearer ${requiredBearer}`) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      void buildWsServer(req.headers.authorization).connect(new WsServerTransport(ws));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/mcp`,
    handshakes,
    async close() {
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/**
 * `node` arguments of a stdio MCP server with the tools `pid` (its process id) and
 * `spawn-child` (starts a long-lived child process and returns its pid), to see that closing
 * a connection kills the server's whole process group. It runs in a fresh temporary directory,
 * so the SDK and zod are imported by absolute URL.
 */
export function pidServerArgs(): string[] {
  const mcp = import.meta.resolve('@modelcontextprotocol/sdk/server/mcp.js');
  const stdio = import.meta.resolve('@modelcontextprotocol/sdk/server/stdio.js');
  const script = `
    import { McpServer } from ${JSON.stringify(mcp)};
    import { StdioServerTransport } from ${JSON.stringify(stdio)};
    import { spawn } from 'node:child_process';
    const server = new McpServer({ name: 'pid-test', version: '1.0.0' });
    server.registerTool('pid', {}, async () => ({ content: [{ type: 'text', text: String(process.pid) }] }));
    server.registerTool('spawn-child', {}, async () => {
      const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
      return { content: [{ type: 'text', text: String(child.pid) }] };
    });
    await server.connect(new StdioServerTransport());
  `;
  return ['--input-type=module', '-e', script];
}
