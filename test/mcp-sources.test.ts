import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import { describe, test } from 'node:test';
import { outboundFetch } from '../src/lib/outbound.ts';
import { connectMcpSource } from '../src/runner/tools/mcp/connect-mcp.ts';
import { resultText } from '../src/runner/tools/mcp/result-text.ts';
import type {
  ConnectOptions,
  ConnectResult,
  SourceToConnect,
  ToolConnection,
} from '../src/runner/tools/types.ts';
import type { SourceConfig } from '../src/schemas/source.ts';
import {
  everythingServerPath,
  freePort,
  pidServerArgs,
  startEverythingHttp,
  startWebSocketMcpServer,
} from './helpers/mcp-servers.ts';
import { waitFor } from './helpers/wait.ts';

function mcpSource(config: SourceConfig, extra: Partial<SourceToConnect> = {}): SourceToConnect {
  return {
    id: randomUUID(),
    slug: 'test-source',
    name: 'Test source',
    type: 'mcp',
    config,
    authType: null,
    authConfig: null,
    secrets: { env: {}, credentials: {} },
    ...extra,
  };
}

function connectOptions({ allowPrivateUrls = true, stdioCommands = ['node'] } = {}): ConnectOptions {
  // stdioSearchPath is the service's PATH in production; here the directory of this node.
  const config = {
    stdioCommands,
    // The config.env names these tests give node servers (SVC_STDIO_COMMANDS node[SOURCE_VAR,API_TOKEN]).
    stdioEnv: new Map([['node', new Set(['SOURCE_VAR', 'API_TOKEN'])]]),
    allowPrivateUrls,
    stdioSearchPath: dirname(process.execPath),
  };
  return {
    config: config as ConnectOptions['config'],
    fetch: outboundFetch({ allowPrivateUrls }),
    timeoutMs: 15_000,
    signal: new AbortController().signal,
  };
}

const stdioEverything = (env: Record<string, string> = {}) =>
  mcpSource(
    { transport: 'stdio', command: 'node', args: [everythingServerPath, 'stdio'], env: {} },
    { secrets: { env, credentials: {} } },
  );

function connection(result: ConnectResult): ToolConnection {
  if (!result.ok) assert.fail(`expected a connection, got ${result.errorType}: ${result.message}`);
  return result.connection;
}

function failure(result: ConnectResult): { errorType: string; message: string } {
  if (result.ok) {
    void result.connection.close();
    assert.fail('expected the connection to fail');
  }
  return result;
}

async function callText(
  conn: ToolConnection,
  name: string,
  args: Record<string, unknown> = {},
): Promise<string> {
  const outcome = await conn.call(name, args, new AbortController().signal);
  if (!outcome.ok) assert.fail(`tool ${name} failed: ${outcome.message}`);
  return outcome.text;
}

const isGone = (pid: number) => {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
};

describe('stdio mcp sources', () => {
  test('a stdio server lists its real tools and answers a call', async () => {
    const conn = connection(await connectMcpSource(stdioEverything(), connectOptions()));
    try {
      const names = conn.tools.map((t) => t.name);
      assert.ok(names.includes('echo') && names.includes('get-sum'), names.join(', '));
      const echo = conn.tools.find((t) => t.name === 'echo');
      assert.equal(echo?.inputSchema.type, 'object');
      assert.equal(await callText(conn, 'echo', { message: 'hi' }), 'Echo: hi');
      assert.match(await callText(conn, 'get-sum', { a: 2, b: 3 }), /\b5\b/);
    } finally {
      await conn.close();
    }
  });

  test('the server sees only the environment of its config, none of the service', async () => {
    const saved = { canary: process.env.SVC_TEST_CANARY, key: process.env.SVC_MODEL_API_KEY };
    process.env.SVC_TEST_CANARY = 'canary-value';
    process.env.SVC_MODEL_API_KEY = 'sk-service-secret';
    try {
      const conn = connection(
        await connectMcpSource(stdioEverything({ SOURCE_VAR: 'from-config' }), connectOptions()),
      );
      try {
        const env = JSON.parse(await callText(conn, 'get-env')) as Record<string, string>;
        assert.equal(env.SOURCE_VAR, 'from-config');
        for (const name of ['SVC_TEST_CANARY', 'SVC_MODEL_API_KEY', 'USER']) {
          assert.equal(env[name], undefined, `${name} leaked into the server`);
        }
        // HOME is the server's own empty directory, not the service's.
        assert.match(env.HOME ?? '', /svc-mcp-/);
        // Without a PATH in its config, the server gets the fixed one, not the service's.
        assert.equal(env.PATH, `${dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`);
      } finally {
        await conn.close();
      }
    } finally {
      if (saved.canary === undefined) delete process.env.SVC_TEST_CANARY;
      else process.env.SVC_TEST_CANARY = saved.canary;
      if (saved.key === undefined) delete process.env.SVC_MODEL_API_KEY;
      else process.env.SVC_MODEL_API_KEY = saved.key;
    }
  });

  test('a command that is not on the allowlist is refused', async () => {
    const result = failure(
      await connectMcpSource(stdioEverything(), connectOptions({ stdioCommands: ['npx'] })),
    );
    assert.equal(result.errorType, 'refused');
    assert.match(result.message, /Test source/);
    assert.match(result.message, /"node"/);
  });

  test('an allowed command that does not exist is unreachable with a clear message', async () => {
    const source = mcpSource({ transport: 'stdio', command: 'svc-no-such-command', args: [] });
    const result = failure(
      await connectMcpSource(source, connectOptions({ stdioCommands: ['svc-no-such-command'] })),
    );
    assert.equal(result.errorType, 'unreachable');
    assert.match(result.message, /svc-no-such-command/);
    assert.match(result.message, /not found/);
  });

  test('a server that exits before answering is unreachable, with its stderr in the message', async () => {
    const source = mcpSource({
      transport: 'stdio',
      command: 'node',
      args: ['-e', "process.stderr.write('boom'); process.exit(3)"],
    });
    const result = failure(await connectMcpSource(source, connectOptions()));
    assert.equal(result.errorType, 'unreachable');
    assert.match(result.message, /code 3/);
    assert.match(result.message, /boom/);
  });

  test('env values of the source never appear in a failure message', async () => {
    const source = mcpSource(
      {
        transport: 'stdio',
        command: 'node',
        args: ['-e', 'process.stderr.write(process.env.API_TOKEN); process.exit(1)'],
      },
      { secrets: { env: { API_TOKEN: 'tok-very-secret-1234' }, credentials: {} } },
    );
    const result = failure(await connectMcpSource(source, connectOptions()));
    assert.equal(result.errorType, 'unreachable');
    assert.doesNotMatch(result.message, /tok-very-secret-1234/);
    assert.match(result.message, /\*{8}/);
  });

  test('closing the connection kills the server and the processes it started', async () => {
    const source = mcpSource({ transport: 'stdio', command: 'node', args: pidServerArgs() });
    const conn = connection(await connectMcpSource(source, connectOptions()));
    const serverPid = Number(await callText(conn, 'pid'));
    const childPid = Number(await callText(conn, 'spawn-child'));
    assert.ok(serverPid > 0 && childPid > 0);
    assert.equal(isGone(childPid), false);
    await conn.close();
    await conn.close(); // idempotent
    await waitFor('the server process to be gone', async () => (isGone(serverPid) ? true : undefined));
    await waitFor('its child process to be gone', async () => (isGone(childPid) ? true : undefined));
    const after = await conn.call('pid', {}, new AbortController().signal);
    assert.equal(after.ok, false);
  });

  test('a failing tool call is an outcome, not an exception', async () => {
    const conn = connection(await connectMcpSource(stdioEverything(), connectOptions()));
    try {
      const unknown = await conn.call('no-such-tool', {}, new AbortController().signal);
      assert.equal(unknown.ok, false);
      const badArgs = await conn.call('get-sum', { a: 'x' }, new AbortController().signal);
      assert.equal(badArgs.ok, false);
    } finally {
      await conn.close();
    }
  });
});

describe('http mcp sources', () => {
  test('a Streamable HTTP server lists its tools and answers a call', async (t) => {
    const server = await startEverythingHttp();
    t.after(() => server.close());
    const conn = connection(
      await connectMcpSource(mcpSource({ transport: 'http', url: server.url }), connectOptions()),
    );
    try {
      assert.ok(conn.tools.some((tool) => tool.name === 'echo'));
      assert.equal(await callText(conn, 'echo', { message: 'over http' }), 'Echo: over http');
    } finally {
      await conn.close();
    }
  });

  test('a server of the older HTTP+SSE transport is reached through the fallback', async (t) => {
    const server = await startEverythingHttp('sse');
    t.after(() => server.close());
    const conn = connection(
      await connectMcpSource(mcpSource({ transport: 'http', url: server.url }), connectOptions()),
    );
    try {
      assert.ok(conn.tools.some((tool) => tool.name === 'echo'));
      assert.equal(await callText(conn, 'echo', { message: 'over sse' }), 'Echo: over sse');
    } finally {
      await conn.close();
    }
  });

  test('a 401 from an http server is auth_failed and the token stays out of the message', async (t) => {
    const http = createServer((_req, res) =>
      res.writeHead(401, { 'content-type': 'text/plain' }).end('bad token'),
    );
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => http.close(() => resolve())));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    const source = mcpSource(
      { transport: 'http', url },
      { authType: 'bearer', authConfig: {}, secrets: { env: {}, credentials: { token: 'tok-secret-http' } } },
    );
    const result = failure(await connectMcpSource(source, connectOptions()));
    assert.equal(result.errorType, 'auth_failed');
    assert.doesNotMatch(result.message, /tok-secret-http/);
  });

  test('an http server that speaks neither transport is a protocol error', async (t) => {
    const http = createServer((_req, res) => res.writeHead(404).end('not here'));
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => http.close(() => resolve())));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    const result = failure(await connectMcpSource(mcpSource({ transport: 'http', url }), connectOptions()));
    assert.equal(result.errorType, 'protocol_error');
    assert.match(result.message, /404/);
  });

  test('a loopback URL is refused when private addresses are not allowed', async () => {
    const options = connectOptions({ allowPrivateUrls: false });
    const http = failure(
      await connectMcpSource(mcpSource({ transport: 'http', url: 'http://127.0.0.1:9/mcp' }), options),
    );
    assert.equal(http.errorType, 'refused');
    const ws = failure(
      await connectMcpSource(mcpSource({ transport: 'websocket', url: 'ws://127.0.0.1:9/mcp' }), options),
    );
    assert.equal(ws.errorType, 'refused');
  });

  test('a port where nothing listens is unreachable', async () => {
    const port = await freePort();
    const http = failure(
      await connectMcpSource(
        mcpSource({ transport: 'http', url: `http://127.0.0.1:${port}/mcp` }),
        connectOptions(),
      ),
    );
    assert.equal(http.errorType, 'unreachable');
    const ws = failure(
      await connectMcpSource(
        mcpSource({ transport: 'websocket', url: `ws://127.0.0.1:${port}/mcp` }),
        connectOptions(),
      ),
    );
    assert.equal(ws.errorType, 'unreachable');
  });

  test('a connector source is not configured', async () => {
    const source = mcpSource(
      { transport: 'http', url: 'https://example.com/mcp' },
      { authType: 'connector' },
    );
    const result = failure(await connectMcpSource(source, connectOptions()));
    assert.equal(result.errorType, 'not_configured');
    assert.match(result.message, /connector provider not configured/);
  });
});

describe('websocket mcp sources', () => {
  const bearerSource = (url: string, token: string | undefined) =>
    mcpSource(
      { transport: 'websocket', url },
      token === undefined
        ? {}
        : { authType: 'bearer', authConfig: {}, secrets: { env: {}, credentials: { token } } },
    );

  test('a WebSocket server lists its tools and answers a call', async (t) => {
    const server = await startWebSocketMcpServer();
    t.after(() => server.close());
    const conn = connection(
      await connectMcpSource(mcpSource({ transport: 'websocket', url: server.url }), connectOptions()),
    );
    try {
      assert.deepEqual(conn.tools.map((tool) => tool.name).sort(), ['add', 'whoami']);
      assert.equal(await callText(conn, 'add', { a: 2, b: 3 }), '5');
      assert.equal(server.handshakes[0]?.['sec-websocket-protocol'], 'mcp');
    } finally {
      await conn.close();
    }
  });

  test('the bearer token goes in the handshake headers', async (t) => {
    const server = await startWebSocketMcpServer({ requiredBearer: 'tok-ws-123' });
    t.after(() => server.close());
    const conn = connection(await connectMcpSource(bearerSource(server.url, 'tok-ws-123'), connectOptions()));
    try {
      assert.equal(server.handshakes[0]?.authorization, 'Bearer tok-ws-123');
      assert.equal(await callText(conn, 'whoami'), 'Bearer tok-ws-123');
    } finally {
      await conn.close();
    }
  });

  test('a missing or wrong token is auth_failed', async (t) => {
    const server = await startWebSocketMcpServer({ requiredBearer: 'tok-ws-123' });
    t.after(() => server.close());
    const wrong = failure(
      await connectMcpSource(bearerSource(server.url, 'tok-wrong-456'), connectOptions()),
    );
    assert.equal(wrong.errorType, 'auth_failed');
    assert.doesNotMatch(wrong.message, /tok-wrong-456/);
    const missing = failure(await connectMcpSource(bearerSource(server.url, undefined), connectOptions()));
    assert.equal(missing.errorType, 'auth_failed');
  });
});

describe('tool results as text', () => {
  test('binary parts become placeholders and structured content is used when there is no text', () => {
    const text = resultText({
      content: [
        { type: 'text', text: 'first' },
        { type: 'image', data: Buffer.from('12345').toString('base64'), mimeType: 'image/png' },
        { type: 'audio', data: Buffer.from('ab').toString('base64'), mimeType: 'audio/wav' },
        { type: 'resource', resource: { uri: 'file:///a.txt', text: 'inline' } },
        { type: 'resource', resource: { uri: 'file:///b.bin', blob: 'AAAA' } },
        { type: 'resource_link', uri: 'https://example.com/x', name: 'x' },
      ],
    });
    assert.equal(
      text,
      'first\n[image: image/png, 5 bytes]\n[audio: audio/wav, 2 bytes]\ninline\n[resource: file:///b.bin]\n[link: https://example.com/x]',
    );
    assert.equal(resultText({ content: [], structuredContent: { sum: 5 } }), '{"sum":5}');
    assert.equal(resultText({ content: [{ type: 'text', text: 't' }], structuredContent: { sum: 5 } }), 't');
  });
});
