import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { outboundFetch } from '../src/lib/outbound.ts';
import { connectLocalSource, currentTime, htmlToText } from '../src/runner/tools/local-tools.ts';
import type { ConnectOptions, SourceToConnect, ToolConnection } from '../src/runner/tools/types.ts';

const LOCAL: SourceToConnect = {
  id: 'src-local',
  slug: 'local',
  name: 'Local tools',
  type: 'local',
  config: {},
  authType: null,
  authConfig: null,
  secrets: { env: {}, credentials: {} },
};

const options = (allowPrivateUrls: boolean): ConnectOptions => ({
  config: { stdioCommands: [], stdioSearchPath: '', allowPrivateUrls },
  fetch: outboundFetch({ allowPrivateUrls }),
  timeoutMs: 5000,
  signal: new AbortController().signal,
});

async function connect(allowPrivateUrls: boolean): Promise<ToolConnection> {
  const result = await connectLocalSource(LOCAL, options(allowPrivateUrls));
  assert.ok(result.ok);
  return result.connection;
}

const signal = () => new AbortController().signal;

const PAGE = `<!DOCTYPE html><html><head><title>Greeting</title>
<style>body { color: red }</style><script>alert("hidden")</script></head>
<body><!-- a comment --><h1>Hello &amp; welcome</h1><p>Fish &lt;3 chips&nbsp;&#x2764; &#169;</p>
<ul><li>one</li><li>two</li></ul><p>a < b</p></body></html>`;

describe('local tools', () => {
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    if (req.url === '/page')
      return res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
    if (req.url === '/long')
      return res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(5000));
    return res.writeHead(404, { 'content-type': 'text/plain' }).end('<b>not here</b>');
  });
  let url = '';
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test('the source offers current_time and fetch_url', async () => {
    const conn = await connect(true);
    assert.deepEqual(
      conn.tools.map((t) => t.name),
      ['current_time', 'fetch_url'],
    );
  });

  test('current_time gives the instant, the local date with its weekday and the zone offset', () => {
    const now = new Date('2025-03-09T20:30:00Z');
    assert.deepEqual(currentTime({ timezone: 'Asia/Tokyo' }, now), {
      ok: true,
      text: 'Instant (UTC): 2025-03-09T20:30:00.000Z\nTime zone: Asia/Tokyo (UTC+09:00)\nLocal: Monday, 2025-03-10 05:30:00',
    });
    assert.match((currentTime({ timezone: 'Asia/Kolkata' }, now) as { text: string }).text, /UTC\+05:30/);
    assert.match(
      (currentTime({ timezone: 'America/New_York' }, new Date('2025-07-01T12:00:00Z')) as { text: string })
        .text,
      /UTC-04:00\)\nLocal: Tuesday, 2025-07-01 08:00:00/,
    );
  });

  test('current_time defaults to UTC', () => {
    const out = currentTime({}, new Date('2025-01-01T00:00:00Z'));
    assert.ok(out.ok);
    assert.match(out.text, /Time zone: UTC \(UTC\+00:00\)\nLocal: Wednesday, 2025-01-01 00:00:00/);
  });

  test('current_time through the connection agrees with itself: the local time is the instant in Tokyo', async () => {
    const conn = await connect(true);
    const out = await conn.call('current_time', { timezone: 'Asia/Tokyo' }, signal());
    assert.ok(out.ok);
    const instant = /Instant \(UTC\): (\S+)/.exec(out.text)?.[1] ?? '';
    const local = /Local: \w+, (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)/.exec(out.text)?.[1] ?? '';
    const tokyo = new Date(Date.parse(instant) + 9 * 3600_000).toISOString().slice(0, 19).replace('T', ' ');
    assert.equal(local, tokyo);
  });

  test('current_time with an unknown time zone is a failed call that says so', async () => {
    const conn = await connect(true);
    const out = await conn.call('current_time', { timezone: 'Mars/Olympus_Mons' }, signal());
    assert.equal(out.ok, false);
    assert.match(!out.ok ? out.message : '', /unknown time zone "Mars\/Olympus_Mons"/);
  });

  test('fetch_url turns an HTML page into readable text', async () => {
    const conn = await connect(true);
    const out = await conn.call('fetch_url', { url: `${url}/page` }, signal());
    assert.deepEqual(out, {
      ok: true,
      text: 'HTTP 200 text/html; charset=utf-8\nGreeting\n\nHello & welcome\n\nFish <3 chips ❤ ©\n\none\n\ntwo\n\na < b',
    });
  });

  test('fetch_url cuts the text at maxChars', async () => {
    const conn = await connect(true);
    const out = await conn.call('fetch_url', { url: `${url}/long`, maxChars: 100 }, signal());
    assert.deepEqual(out, {
      ok: true,
      text: `HTTP 200 text/plain\n${'x'.repeat(100)}\n[cut at 100 characters]`,
    });
  });

  test('fetch_url reports an error status with the body, without stripping text that is not HTML', async () => {
    const conn = await connect(true);
    const out = await conn.call('fetch_url', { url: `${url}/nothing` }, signal());
    assert.deepEqual(out, { ok: true, text: 'HTTP 404 text/plain\n<b>not here</b>' });
  });

  test('fetch_url of a loopback address is refused when private addresses are not allowed', async () => {
    const conn = await connect(false);
    const before = requests;
    const out = await conn.call('fetch_url', { url: `${url}/page` }, signal());
    assert.equal(out.ok, false);
    assert.match(!out.ok ? out.message : '', /SVC_ALLOW_PRIVATE_URLS/);
    assert.equal(requests, before);
  });

  test('fetch_url takes only http and https URLs and a sane maxChars', async () => {
    const conn = await connect(true);
    for (const args of [
      { url: 'file:///etc/passwd' },
      { url: 'not a url' },
      { url: `${url}/page`, maxChars: 0 },
    ]) {
      assert.equal((await conn.call('fetch_url', args, signal())).ok, false, JSON.stringify(args));
    }
  });

  test('htmlToText gets through unclosed tags, comments and scripts', () => {
    assert.equal(htmlToText('<p>kept</p><script>dropped'), 'kept');
    assert.equal(htmlToText('text <!-- open comment'), 'text');
    assert.ok(htmlToText(`${'<'.repeat(100_000)} end`) === `${'<'.repeat(100_000)} end`);
    assert.equal(htmlToText(`${'<a '.repeat(100_000)}`), '');
    assert.equal(htmlToText('<td>a</td><td>b</td>'), 'a b');
    assert.equal(htmlToText('&amp;lt; &#0; &bogus;'), '&lt; &#0; &bogus;');
  });
});
