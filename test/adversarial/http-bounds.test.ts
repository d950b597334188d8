// Adversarial tests of the HTTP server over real sockets: a client that trickles its body, holds
// idle connections, opens too many, sends an oversized or malformed head, or sends bytes that
// are not UTF-8, gets a bounded answer in the error envelope and never holds the server.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startTestService, type TestService } from '../helpers/service.ts';

const REQUEST_TIMEOUT_SECONDS = 2;
const KEEP_ALIVE_SECONDS = 1;
const MAX_CONNECTIONS = 4;
/** Far beyond every limit above: a socket still open then was never going to be closed. */
const GIVE_UP_MS = 12_000;

interface Exchange {
  /** Everything the server wrote before it closed the connection (or before the test gave up). */
  received: string;
  closed: boolean;
  /** Milliseconds from the first byte sent to the close. */
  closedAfterMs: number;
}

function open(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Sends `head`, then `trickle` one byte a second, until the server closes or GIVE_UP_MS passes. */
function exchange(socket: Socket, head: string, trickle = ''): Promise<Exchange> {
  return new Promise((resolve) => {
    const started = Date.now();
    let received = '';
    let sent = 0;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      received += chunk;
    });
    socket.on('error', () => undefined);
    const timer = setInterval(() => {
      if (sent < trickle.length && socket.writable) socket.write(trickle[sent++] ?? '');
    }, 1000);
    const giveUp = setTimeout(() => finish(false), GIVE_UP_MS);
    function finish(closed: boolean) {
      clearInterval(timer);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ received, closed, closedAfterMs: Date.now() - started });
    }
    socket.once('close', () => finish(true));
    socket.write(head);
  });
}

function envelopeOf(received: string): { status: number; body: any } {
  const [head = '', body = ''] = received.split('\r\n\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  return { status, body: JSON.parse(body) };
}

describe('HTTP bounds over real sockets', () => {
  let ts: TestService;
  let base: string;
  let org: { organizationId: string; apiKey: string };

  before(async () => {
    ts = await startTestService({
      listen: true,
      env: {
        SVC_HTTP_REQUEST_TIMEOUT_SECONDS: String(REQUEST_TIMEOUT_SECONDS),
        SVC_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS: String(KEEP_ALIVE_SECONDS),
        SVC_HTTP_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
      },
    });
    base = ts.service.url ?? '';
    org = await ts.createOrg('paid');
  });
  after(() => ts?.close());

  test('an authenticated request that trickles its body is answered 408 and closed within the request timeout', async () => {
    const socket = await open(base);
    const body = JSON.stringify({ organizationId: org.organizationId, name: 'slow', content: 'x' });
    const head =
      'POST /api/svc/skills HTTP/1.1\r\nHost: svc\r\n' +
      `Authorization: Bearer ${org.apiKey}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n`;
    const result = await exchange(socket, head, body);
    assert.equal(result.closed, true, 'the server never closed the trickling connection');
    assert.ok(
      result.closedAfterMs < (REQUEST_TIMEOUT_SECONDS + 3) * 1000,
      `closed only after ${result.closedAfterMs} ms`,
    );
    const answer = envelopeOf(result.received);
    assert.equal(answer.status, 408);
    assert.equal(answer.body.error.code, 'request_timeout');
  });

  test('an idle keep-alive connection is closed after the keep-alive timeout', async () => {
    const socket = await open(base);
    const result = await exchange(socket, 'GET /healthz HTTP/1.1\r\nHost: svc\r\n\r\n');
    assert.match(result.received, /^HTTP\/1\.1 200/);
    assert.equal(result.closed, true, 'the idle connection was kept open');
    assert.ok(
      result.closedAfterMs < (KEEP_ALIVE_SECONDS + 3) * 1000,
      `closed after ${result.closedAfterMs} ms`,
    );
  });

  test('connections beyond the cap are closed at once while those within it are served', async () => {
    const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => open(base)));
    try {
      // The server counts a connection once it has accepted it; give it that moment.
      await new Promise((r) => setTimeout(r, 200));
      const extra = await open(base).catch(() => undefined);
      if (extra) {
        const refused = await exchange(extra, 'GET /healthz HTTP/1.1\r\nHost: svc\r\n\r\n');
        assert.equal(refused.received, '', 'a connection beyond the cap was served');
        assert.equal(refused.closed, true);
      }
      const first = held[0];
      assert.ok(first);
      const served = await exchange(first, 'GET /healthz HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n');
      assert.match(served.received, /^HTTP\/1\.1 200/);
    } finally {
      for (const s of held) s.destroy();
    }
  });

  test('a request head over 16 KiB is answered 431 in the error envelope', async () => {
    const socket = await open(base);
    const head = `GET /healthz HTTP/1.1\r\nHost: svc\r\nX-Padding: ${'a'.repeat(20 * 1024)}\r\n\r\n`;
    const answer = envelopeOf((await exchange(socket, head)).received);
    assert.equal(answer.status, 431);
    assert.equal(answer.body.error.code, 'request_header_too_large');
  });

  test('a malformed request is answered 400 in the error envelope', async () => {
    const socket = await open(base);
    const answer = envelopeOf((await exchange(socket, 'GET /healthz HTTP/1.1\r\nHost svc\r\n\r\n')).received);
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error.code, 'validation_error');
  });

  test('a JSON body that is not valid UTF-8 is a 400 and nothing is stored', async () => {
    const json = JSON.stringify({ organizationId: org.organizationId, name: 'Bad bytes', content: 'AB' });
    const at = Buffer.from(json).indexOf('AB');
    const payload = Buffer.concat([
      Buffer.from(json.slice(0, at)),
      Buffer.from([0x41, 0xff, 0xfe]),
      Buffer.from(json.slice(at + 2)),
    ]);
    const res = await ts.app.inject({
      method: 'POST',
      url: '/api/svc/skills',
      headers: { authorization: `Bearer ${org.apiKey}`, 'content-type': 'application/json' },
      payload,
    });
    assert.equal(res.statusCode, 400, res.body);
    const body = res.json();
    assert.equal(body.error.code, 'validation_error');
    assert.deepEqual(body.error.details, [{ path: '/body', message: 'is not valid UTF-8' }]);
    const list = await ts.call({
      method: 'GET',
      url: `/api/svc/skills?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    assert.deepEqual(list.body, []);
  });
});

describe('HTTP bounds at their largest', () => {
  test('a request timeout above Node’s own default of 300 s still starts the server', async () => {
    const ts = await startTestService({ listen: true, env: { SVC_HTTP_REQUEST_TIMEOUT_SECONDS: '3600' } });
    try {
      assert.equal(ts.app.server.requestTimeout, 3_600_000);
      assert.equal(ts.app.server.headersTimeout, 3_600_000);
    } finally {
      await ts.close();
    }
  });
});
