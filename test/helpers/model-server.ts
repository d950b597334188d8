import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the model server received. */
export interface ModelRequest {
  authorization: string | undefined;
  body: { model: string; messages: { role: string; content: string }[] };
}

export interface ModelReply {
  status?: number;
  headers?: Record<string, string>;
  /** The assistant's answer (status 200). */
  content?: string;
  /** An error body (non-200). */
  error?: string;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number; cost?: number };
  delayMs?: number;
}

export interface ModelServer {
  url: string;
  requests: ModelRequest[];
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  let data = '';
  for await (const chunk of req) data += chunk;
  return data;
}

/**
 * A local stand-in for a model provider that speaks the OpenAI Chat Completions wire format
 * (POST {base}/chat/completions). `reply` decides each answer; by default it echoes the user
 * prompt with fixed usage.
 */
export async function startModelServer(
  reply: (req: ModelRequest, index: number) => ModelReply = () => ({}),
): Promise<ModelServer> {
  const requests: ModelRequest[] = [];
  const server: Server = createServer(async (req, res) => {
    const raw = await readBody(req);
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not found' } }));
      return;
    }
    const request: ModelRequest = { authorization: req.headers.authorization, body: JSON.parse(raw) };
    const index = requests.push(request) - 1;
    const r = reply(request, index);
    if (r.delayMs) await new Promise((resolve) => setTimeout(resolve, r.delayMs));
    if (res.destroyed) return;
    const status = r.status ?? 200;
    res.writeHead(status, { 'content-type': 'application/json', ...r.headers });
    if (status !== 200) {
      res.end(JSON.stringify({ error: { message: r.error ?? 'failure', type: 'server_error' } }));
      return;
    }
    const prompt = request.body.messages.at(-1)?.content ?? '';
    res.end(
      JSON.stringify({
        id: `chatcmpl-${index}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: request.body.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: r.content ?? `Answer to: ${prompt}` },
            finish_reason: 'stop',
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
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
