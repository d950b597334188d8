// An instant model provider for the scheduler benchmark, run as its own process so that its CPU
// is not the benchmark's: every Chat Completions request (POST .../chat/completions) is answered
// at once, streamed (SSE) when asked, with fixed usage. Prints `listening <base url>` on stdout
// and answers `GET /count` with the number of completions served.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

let served = 0;

function sse(id: string, model: string): string {
  const created = Math.floor(Date.now() / 1000);
  const chunk = (body: object) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, ...body })}\n\n`;
  return (
    chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: { content: 'Done.' }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }) +
    chunk({ choices: [], usage: { prompt_tokens: 100, completion_tokens: 5, total_tokens: 105 } }) +
    'data: [DONE]\n\n'
  );
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/count') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ served }));
    return;
  }
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (d: string) => {
    raw += d;
  });
  req.on('end', () => {
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"not found"}}');
      return;
    }
    let body: { model?: string; stream?: boolean };
    try {
      body = JSON.parse(raw) as { model?: string; stream?: boolean };
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"bad json"}}');
      return;
    }
    served++;
    const id = `chatcmpl-${served}`;
    const model = body.model ?? 'bench';
    if (body.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(sse(id, model));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: 'Done.' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 100, completion_tokens: 5, total_tokens: 105 },
      }),
    );
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`listening http://127.0.0.1:${port}/v1\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
