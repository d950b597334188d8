// A local webhook receiver: records each request's headers and raw body (the signature is over
// the exact bytes) and answers a scripted reply per request index, by default 200.
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface ReceiverReply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Take the request and never answer (until close). */
  hang?: boolean;
}

export interface WebhookReceiver {
  url: string;
  requests: ReceivedWebhook[];
  close(): Promise<void>;
}

/** `replies[i]` answers the i-th request; requests past the list get 200 "ok". */
export async function startWebhookReceiver(replies: ReceiverReply[] = []): Promise<WebhookReceiver> {
  const requests: ReceivedWebhook[] = [];
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const reply = replies[requests.length] ?? {};
    requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
    if (reply.hang) return;
    res.writeHead(reply.status ?? 200, { 'content-type': 'text/plain', ...reply.headers });
    res.end(reply.body ?? 'ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        // A hanging request keeps its socket open; close() would wait for it forever.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
