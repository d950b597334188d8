// A local Twilio-compatible Messages API: records each request (path, Authorization header,
// form fields) and answers a scripted reply per request index, by default Twilio's 201.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SmsRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  form: Record<string, string>;
}

export interface SmsReply {
  status?: number;
  headers?: Record<string, string>;
  /** A string is sent as is; anything else as JSON. */
  body?: unknown;
}

export interface TestSmsServer {
  /** The API base (SVC_SMS_API_BASE). */
  url: string;
  requests: SmsRequest[];
  close(): Promise<void>;
}

/**
 * `replies[i]` answers the i-th request; what a reply leaves out (and requests past the list)
 * gets Twilio's usual 201 with a message resource.
 */
export async function startSmsServer(replies: SmsReply[] = []): Promise<TestSmsServer> {
  const requests: SmsRequest[] = [];
  const server = createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const index = requests.length;
    const form = Object.fromEntries(new URLSearchParams(raw));
    requests.push({
      method: req.method ?? '',
      path: req.url ?? '',
      authorization: req.headers.authorization,
      contentType: req.headers['content-type'],
      form,
    });
    const reply = replies[index] ?? {};
    const twilio = {
      sid: `SM${String(index).padStart(32, '0')}`,
      status: 'queued',
      to: form.To,
      from: form.From,
      body: form.Body,
      num_segments: '1',
    };
    const replyBody = reply.body ?? twilio;
    const body = typeof replyBody === 'string' ? replyBody : JSON.stringify(replyBody);
    res.writeHead(reply.status ?? 201, { 'content-type': 'application/json', ...reply.headers });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
