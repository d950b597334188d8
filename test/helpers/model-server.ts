import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A message of a Chat Completions request, as the service sent it. */
export interface SentMessage {
  role: string;
  content: string | null;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/** One request the model server received. */
export interface ModelRequest {
  authorization: string | undefined;
  body: {
    model: string;
    messages: SentMessage[];
    stream?: boolean;
    max_tokens?: number;
    response_format?: { type: string; json_schema?: { name: string; schema?: unknown; strict?: boolean } };
    tools?: { type: string; function: { name: string; description?: string; parameters?: unknown } }[];
  };
}

export interface ModelReply {
  status?: number;
  headers?: Record<string, string>;
  /** The assistant's answer (status 200). */
  content?: string;
  /** Tool calls the assistant makes instead of (or with) an answer. */
  toolCalls?: { name: string; arguments: unknown }[];
  /** An error body (non-200). */
  error?: string;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number; cost?: number };
  delayMs?: number;
  /** Answer only once this settles (then after `delayMs`): holds a call until the test lets it go. */
  heldUntil?: Promise<unknown>;
  /** Accept the request and never answer. */
  hang?: boolean;
  /** The stream's finish_reason (default: stop, or tool_calls with tool calls). */
  finishReason?: string;
  /**
   * Streamed requests: answer with this text as content chunks, again and again, until the
   * client goes away (no finish, no usage), as a provider ignoring max_tokens would.
   */
  endless?: string;
  /** With `endless`: one piece every this many ms (a provider generating slowly), not as fast as it can. */
  trickleMs?: number;
  /** Streamed requests: open one event and never end its line, until the client goes away. */
  endlessLine?: boolean;
  /** Streamed requests: this text as the whole event stream, as given (error events, broken JSON). */
  rawStream?: string;
  /** With `rawStream`: the connection is then cut, the answer never ended. */
  cut?: boolean;
  /** Answer a streamed request with the whole completion as JSON, as a provider ignoring `stream` does. */
  ignoreStream?: boolean;
}

export interface ModelServer {
  url: string;
  requests: ModelRequest[];
  /** Bytes and events written by endless answers, and how many of them the client stopped. */
  endless: { bytes: number; events: number; stopped: number };
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  let data = '';
  for await (const chunk of req) data += chunk;
  return data;
}

function lastUserText(request: ModelRequest): string {
  const user = request.body.messages.filter((m) => m.role === 'user').at(-1);
  return user?.content ?? '';
}

/** The answer as the SSE chunks of a streamed completion: content in pieces, tool calls, usage. */
function writeStream(
  res: ServerResponse,
  id: string,
  model: string,
  r: ModelReply,
  content: string | null,
): void {
  const chunk = (delta: object, finish: string | null, usage?: object) =>
    `data: ${JSON.stringify({
      id,
      object: 'chat.completion.chunk',
      created: Math.floor(Date.now() / 1000),
      model,
      choices: usage ? [] : [{ index: 0, delta, finish_reason: finish }],
      ...(usage && { usage }),
    })}\n\n`;
  res.write(chunk({ role: 'assistant', content: '' }, null));
  // Split the answer in three pieces, as a real stream would deliver it.
  if (content) {
    const third = Math.ceil(content.length / 3);
    for (let i = 0; i < content.length; i += third)
      res.write(chunk({ content: content.slice(i, i + third) }, null));
  }
  (r.toolCalls ?? []).forEach((call, index) => {
    const args = typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments);
    const half = Math.ceil(args.length / 2);
    res.write(
      chunk(
        {
          tool_calls: [
            {
              index,
              id: `call_${id}_${index}`,
              type: 'function',
              function: { name: call.name, arguments: args.slice(0, half) },
            },
          ],
        },
        null,
      ),
    );
    res.write(chunk({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] }, null));
  });
  res.write(chunk({}, r.finishReason ?? (r.toolCalls?.length ? 'tool_calls' : 'stop')));
  res.write(chunk({}, null, r.usage ?? { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 }));
  res.end('data: [DONE]\n\n');
}

/**
 * Writes `piece` over and over until the client closes the connection, at most about 16 MB a
 * second, so that a client that does not stop holds a growing but survivable amount.
 */
async function writeUntilClosed(
  res: ServerResponse,
  piece: string,
  counter: { bytes: number; events: number; stopped: number },
  trickleMs?: number,
): Promise<void> {
  const closed = new Promise<void>((resolve) => res.once('close', resolve));
  let open = true;
  void closed.then(() => {
    open = false;
  });
  while (open) {
    const burst = trickleMs === undefined ? 256 * 1024 : 1;
    for (let sent = 0; open && sent < burst; sent += piece.length) {
      counter.bytes += piece.length;
      counter.events++;
      if (!res.write(piece)) await Promise.race([new Promise((r) => res.once('drain', r)), closed]);
    }
    await new Promise((r) => setTimeout(r, trickleMs ?? 16));
  }
  counter.stopped++;
}

/**
 * A local stand-in for a model provider that speaks the OpenAI Chat Completions wire format
 * (POST {base}/chat/completions), streamed (SSE chunks) when the request asks for it. `reply`
 * decides each answer; by default it answers "Answer to: <last user message>" with fixed usage.
 */
export async function startModelServer(
  reply: (req: ModelRequest, index: number) => ModelReply = () => ({}),
): Promise<ModelServer> {
  const requests: ModelRequest[] = [];
  const endless = { bytes: 0, events: 0, stopped: 0 };
  const server = createServer(async (req, res) => {
    const raw = await readBody(req);
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not found' } }));
      return;
    }
    const request: ModelRequest = { authorization: req.headers.authorization, body: JSON.parse(raw) };
    const index = requests.push(request) - 1;
    const r = reply(request, index);
    if (r.hang) return;
    if (r.heldUntil) await r.heldUntil;
    if (r.delayMs) await new Promise((resolve) => setTimeout(resolve, r.delayMs));
    if (res.destroyed) return;
    const status = r.status ?? 200;
    if (status !== 200) {
      res.writeHead(status, { 'content-type': 'application/json', ...r.headers });
      res.end(JSON.stringify({ error: { message: r.error ?? 'failure', type: 'server_error' } }));
      return;
    }
    const id = `chatcmpl-${index}`;
    const content = r.content ?? (r.toolCalls?.length ? null : `Answer to: ${lastUserText(request)}`);
    const stream = request.body.stream && !r.ignoreStream;
    if (stream && (r.endless !== undefined || r.endlessLine)) {
      res.writeHead(200, { 'content-type': 'text/event-stream', ...r.headers });
      const piece = r.endless
        ? `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: request.body.model, choices: [{ index: 0, delta: { content: r.endless }, finish_reason: null }] })}\n\n`
        : 'x'.repeat(64 * 1024);
      if (r.endlessLine) res.write(`data: {"id":"${id}","choices":[{"index":0,"delta":{"content":"`);
      await writeUntilClosed(res, piece, endless, r.trickleMs);
      return;
    }
    if (stream && r.rawStream !== undefined) {
      res.writeHead(200, { 'content-type': 'text/event-stream', ...r.headers });
      if (!r.cut) return res.end(r.rawStream);
      res.write(r.rawStream);
      setTimeout(() => res.destroy(), 20);
      return;
    }
    if (stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream', ...r.headers });
      writeStream(res, id, request.body.model, r, content);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', ...r.headers });
    res.end(
      JSON.stringify({
        id,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: request.body.model,
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content,
              ...(r.toolCalls?.length && {
                tool_calls: r.toolCalls.map((c, i) => ({
                  id: `call_${id}_${i}`,
                  type: 'function',
                  function: {
                    name: c.name,
                    arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
                  },
                })),
              }),
            },
            finish_reason: r.toolCalls?.length ? 'tool_calls' : 'stop',
          },
        ],
        usage: r.usage ?? { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 },
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    endless,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
