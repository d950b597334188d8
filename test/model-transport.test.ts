// The model calls' HTTP transport (src/runner/model-transport.ts), against a real HTTP server:
// an answer's status, headers and body as it streams, its bounds, the wait for its start, and
// an abort that ends the request or the body's read.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { tooLargeIn } from '../src/runner/capped-response.ts';
import {
  answerText,
  type ModelHttpAnswer,
  ModelTimeoutError,
  modelTransport,
} from '../src/runner/model-transport.ts';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

describe('the model transport', () => {
  let server: http.Server;
  let base: string;
  let handler: Handler = (_req, res) => res.end();
  const MAX_BODY = 1024 * 1024;
  const transport = modelTransport({ maxBodyBytes: MAX_BODY });
  const post = (
    url: string,
    o: { headers?: Record<string, string>; body?: string; signal?: AbortSignal; timeoutMs?: number } = {},
  ) =>
    transport.post({
      url: new URL(url),
      headers: o.headers ?? {},
      body: o.body ?? '{}',
      timeoutMs: o.timeoutMs ?? 10_000,
      signal: o.signal ?? new AbortController().signal,
    });
  const chunksOf = (res: ModelHttpAnswer) => {
    assert.ok(res.body);
    return res.body;
  };

  before(async () => {
    server = http.createServer(async (req, res) => {
      let body = '';
      for await (const chunk of req) body += chunk;
      handler(req, res, body);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  test('a streamed answer is read as it is sent, with its status and every header', async () => {
    let release: () => void = () => undefined;
    const second = new Promise<void>((r) => {
      release = r;
    });
    handler = (req, res, body) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'set-cookie': ['a=1', 'b=2'] });
      res.write(`data: ${req.method} ${req.headers['x-key']} ${body}\n\n`);
      void second.then(() => res.end('data: [DONE]\n\n'));
    };
    const res = await post(`${base}/v1/chat`, {
      headers: { 'x-key': 'k1', 'content-type': 'application/json' },
      body: '{"q":1}',
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'text/event-stream');
    assert.deepEqual(res.headers['set-cookie'], ['a=1', 'b=2']);
    const reader = chunksOf(res);
    const first = await reader.next();
    // The first event arrived before the server sent the rest.
    assert.equal(new TextDecoder().decode(first.value), 'data: POST k1 {"q":1}\n\n');
    release();
    const rest = await reader.next();
    assert.equal(new TextDecoder().decode(rest.value), 'data: [DONE]\n\n');
    assert.equal((await reader.next()).done, true);
  });

  test("an error's status, headers and body reach the reader, and connections are kept for the next call", async () => {
    const ports = new Set<number | undefined>();
    handler = (req, res) => {
      ports.add(req.socket.remotePort);
      res.writeHead(429, { 'retry-after': '2', 'content-type': 'application/json' });
      res.end('{"error":{"message":"slow down"}}');
    };
    for (let i = 0; i < 3; i++) {
      const res = await post(`${base}/v1/chat`);
      assert.equal(res.status, 429);
      assert.equal(res.headers['retry-after'], '2');
      assert.deepEqual(JSON.parse(await answerText(res)), { error: { message: 'slow down' } });
    }
    assert.equal(ports.size, 1, 'one connection for three calls in turn');
  });

  test('a compressed answer is read decompressed, and an answer without a body has none', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-encoding': 'gzip' });
      res.end(gzipSync('data: compressed\n\n'));
    };
    assert.equal(await answerText(await post(`${base}/`)), 'data: compressed\n\n');
    handler = (_req, res) => {
      res.writeHead(204);
      res.end();
    };
    const empty = await post(`${base}/`);
    assert.equal(empty.status, 204);
    assert.equal(empty.body, null);
  });

  test('a compressed answer is bounded by what it decompresses to, as the model client reads it', async () => {
    // 8 MiB of one byte compresses to a few KB: the byte bound must count what comes out.
    handler = (_req, res) => {
      res.writeHead(200, { 'content-encoding': 'gzip' });
      res.end(gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x61)));
    };
    const err = await answerText(await post(`${base}/`)).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.equal(tooLargeIn(err)?.maxBytes, MAX_BODY);
  });

  test('an event stream is bounded per event: any number of events pass, one event past the bound ends the transfer', async () => {
    const event = `data: ${'x'.repeat(64 * 1024)}\n\n`;
    let closed: Promise<void> = Promise.resolve();
    handler = (req, res) => {
      closed = new Promise((resolve) => req.socket.once('close', () => resolve()));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // 2 MiB of events in all, each of 64 KiB: within the bound of 1 MiB per event.
      for (let i = 0; i < 32; i++) res.write(event);
      if (req.url === '/long') res.write(`data: ${'y'.repeat(MAX_BODY)}`);
      else res.end();
    };
    assert.equal((await answerText(await post(`${base}/`))).length, 32 * event.length);
    const err = await answerText(await post(`${base}/long`)).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.match(String(tooLargeIn(err)?.message), /^one event of the answer was larger than 1 MiB$/);
    // The server never ended that answer: the transport closed its connection.
    await closed;
  });

  test('a body given up, before any of it is read or after a part, ends its transfer', async () => {
    for (const readFirst of [false, true]) {
      let closed: Promise<void> = Promise.resolve();
      handler = (req, res) => {
        closed = new Promise((resolve) => req.socket.once('close', () => resolve()));
        // An answer that never ends: only its reader giving it up ends the transfer.
        res.writeHead(503, { 'content-type': 'text/event-stream' });
        res.write('data: busy\n\n');
      };
      const reader = chunksOf(await post(`${base}/`));
      if (readFirst) assert.equal(new TextDecoder().decode((await reader.next()).value), 'data: busy\n\n');
      assert.deepEqual(await reader.return?.(), { done: true, value: undefined });
      await closed;
    }
  });

  test('an abort before the answer rejects with the abort and closes the connection', async () => {
    const closed = new Promise<void>((resolve) => {
      handler = (req) => req.socket.once('close', () => resolve());
    });
    const controller = new AbortController();
    const pending = post(`${base}/`, { body: 'x', signal: controller.signal });
    await new Promise((r) => setTimeout(r, 50));
    controller.abort();
    await assert.rejects(pending, { name: 'AbortError' });
    await closed;
    // Already aborted: refused without a request.
    await assert.rejects(post(`${base}/`, { signal: controller.signal }), { name: 'AbortError' });
  });

  test('an answer that does not start within its time fails the request and closes the connection; one that started is read to its end however long it takes', async () => {
    const closed = new Promise<void>((resolve) => {
      handler = (req) => req.socket.once('close', () => resolve());
    });
    await assert.rejects(post(`${base}/`, { timeoutMs: 100 }), ModelTimeoutError);
    await closed;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: one\n\n');
      setTimeout(() => res.end('data: two\n\n'), 300);
    };
    assert.equal(await answerText(await post(`${base}/`, { timeoutMs: 100 })), 'data: one\n\ndata: two\n\n');
  });

  test('an abort while the body is read ends the read with the abort', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
    };
    const controller = new AbortController();
    const reader = chunksOf(await post(`${base}/`, { signal: controller.signal }));
    assert.equal(new TextDecoder().decode((await reader.next()).value), 'data: first\n\n');
    controller.abort();
    await assert.rejects(reader.next(), { name: 'AbortError' });
  });

  test('an unreachable provider and a URL it cannot reach are refused', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const s = http.createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as AddressInfo;
        s.close(() => resolve(port));
      });
    });
    await assert.rejects(post(`http://127.0.0.1:${closedPort}/`), { code: 'ECONNREFUSED' });
    await assert.rejects(post('ftp://127.0.0.1/'), /cannot reach ftp: URLs/);
  });

  test('an https provider is reached over TLS, and a certificate no authority signed is refused', async () => {
    // A key and certificate made for this test alone (test/fixtures), which no authority signed.
    const tls = https.createServer(
      {
        key: readFileSync(new URL('./fixtures/self-signed-key.pem', import.meta.url)),
        cert: readFileSync(new URL('./fixtures/self-signed-cert.pem', import.meta.url)),
      },
      (_req, res) => res.end('data: secret\n\n'),
    );
    tls.listen(0, '127.0.0.1');
    await once(tls, 'listening');
    try {
      const { port } = tls.address() as AddressInfo;
      await assert.rejects(post(`https://127.0.0.1:${port}/`), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    } finally {
      tls.close();
    }
  });

  test("a model call loads none of Node's fetch implementation (an idle worker and its first run do without its memory)", () => {
    // In a process of its own: this one has long loaded Node's fetch classes.
    const script = `const { modelTransport, answerText } = await import(${JSON.stringify(new URL('../src/runner/model-transport.ts', import.meta.url).href)});
      const http = process.getBuiltinModule('node:http');
      const server = http.createServer((req, res) => res.end('data: hi\\n\\n'));
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      const answer = await modelTransport({ maxBodyBytes: 1024 }).post({
        url: new URL('http://127.0.0.1:' + server.address().port + '/'), headers: {}, body: '{}',
        timeoutMs: 5000, signal: new AbortController().signal });
      const text = await answerText(answer);
      server.close();
      const loaded = process.moduleLoadList.includes('NativeModule internal/deps/undici/undici');
      console.log(JSON.stringify({ text, loaded }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.deepEqual(JSON.parse(out), { text: 'data: hi\n\n', loaded: false });
  });
});
