import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import { assertOutboundUrl, isPrivateAddress, OutboundUrlError, outboundFetch } from '../src/lib/outbound.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A local HTTP server on 127.0.0.1 for the duration of the file. */
async function serve(handler: Handler): Promise<string> {
  const server = createServer(handler);
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const closed = { allowPrivateUrls: false };
const open = { allowPrivateUrls: true };

describe('isPrivateAddress', () => {
  test('private, loopback, link-local and reserved IPv4 addresses are private', () => {
    for (const address of [
      '127.0.0.1',
      '127.255.0.9',
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
    ]) {
      assert.equal(isPrivateAddress(address), true, address);
    }
  });

  test('public IPv4 addresses are not private, including neighbours of the private ranges', () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '172.15.255.255', '100.128.0.1', '11.0.0.1']) {
      assert.equal(isPrivateAddress(address), false, address);
    }
  });

  test('loopback, unique local, link-local, documentation and NAT64 IPv6 addresses are private', () => {
    for (const address of [
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fd12:3456::1',
      '2001:db8::1',
      'ff02::1',
      '64:ff9b::7f00:1',
    ]) {
      assert.equal(isPrivateAddress(address), true, address);
    }
  });

  test('public IPv6 addresses are not private', () => {
    for (const address of ['2606:4700:4700::1111', '2001:4860:4860::8888']) {
      assert.equal(isPrivateAddress(address), false, address);
    }
  });

  test('IPv4-mapped IPv6 addresses are judged by their IPv4 address, in dotted and hex form', () => {
    for (const address of ['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:a9fe:a9fe']) {
      assert.equal(isPrivateAddress(address), true, address);
    }
    assert.equal(isPrivateAddress('::ffff:8.8.8.8'), false);
  });

  test('something that is not an IP address counts as private', () => {
    assert.equal(isPrivateAddress('example.com'), true);
    assert.equal(isPrivateAddress(''), true);
  });
});

describe('assertOutboundUrl', () => {
  test('loopback, private and metadata addresses are refused with a message naming the setting', async () => {
    for (const url of [
      'http://127.0.0.1/',
      'http://localhost:8080/x',
      'http://[::1]/',
      'http://10.1.2.3/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:127.0.0.1]/',
      'http://2130706433/',
    ]) {
      await assert.rejects(assertOutboundUrl(url, closed), (err: unknown) => {
        assert.ok(err instanceof OutboundUrlError, url);
        assert.equal(err.reason, 'refused');
        assert.match(err.message, /SVC_ALLOW_PRIVATE_URLS/);
        return true;
      });
    }
  });

  test('a scheme other than http and https is refused whatever the policy', async () => {
    await assert.rejects(assertOutboundUrl('file:///etc/passwd', open), OutboundUrlError);
    await assert.rejects(assertOutboundUrl('ftp://example.com/', open), OutboundUrlError);
  });

  test('a URL with a user name or password is refused whatever the policy', async () => {
    await assert.rejects(assertOutboundUrl('http://user:pw@127.0.0.1/', open), /user name or password/);
    await assert.rejects(assertOutboundUrl('https://user@example.com/', closed), /user name or password/);
  });

  test('a text that is not a URL is refused', async () => {
    await assert.rejects(assertOutboundUrl('not a url', open), /not a valid URL/);
  });

  test('private addresses are allowed when the policy allows them', async () => {
    for (const url of ['http://127.0.0.1/', 'http://localhost/', 'http://[::1]/', 'http://10.0.0.1/']) {
      assert.equal((await assertOutboundUrl(url, open)).href, new URL(url).href);
    }
  });

  test('a host that does not resolve is reported as unresolvable, not as refused', async () => {
    await assert.rejects(assertOutboundUrl('http://no-such-host.invalid/', closed), (err: unknown) => {
      assert.ok(err instanceof OutboundUrlError);
      assert.equal(err.reason, 'unresolvable');
      return true;
    });
  });
});

describe('outboundFetch', () => {
  const seen: { path: string; authorization: string | undefined }[] = [];
  let other = '';
  const url = serve((req, res) => {
    seen.push({ path: req.url ?? '', authorization: req.headers.authorization });
    const to: Record<string, string> = {
      '/to-file': 'file:///etc/passwd',
      '/to-credentials': `${other.replace('http://', 'http://user:pw@')}/`,
      '/to-same-origin': '/hello',
      '/to-other-origin': `${other}/landing`,
    };
    const location = to[req.url ?? ''];
    if (location) {
      res.writeHead(302, { location }).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`hello from ${req.url}`);
  });
  const otherUrl = serve((req, res) => {
    seen.push({ path: `other${req.url}`, authorization: req.headers.authorization });
    res.writeHead(200).end('landed');
  });

  test('a loopback URL is refused when private addresses are not allowed', async () => {
    await assert.rejects(outboundFetch(closed)(`${await url}/`), OutboundUrlError);
  });

  test('a loopback URL is fetched when private addresses are allowed', async () => {
    const res = await outboundFetch(open)(`${await url}/plain`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'hello from /plain');
  });

  test('a redirect to a file: URL is checked again and refused', async () => {
    await assert.rejects(outboundFetch(open)(`${await url}/to-file`), /file: URLs are not allowed/);
  });

  test('a redirect to a URL with credentials is checked again and refused', async () => {
    other = await otherUrl;
    await assert.rejects(outboundFetch(open)(`${await url}/to-credentials`), /user name or password/);
  });

  test('a redirect within the origin is followed with the Authorization header', async () => {
    seen.length = 0;
    const res = await outboundFetch(open)(`${await url}/to-same-origin`, {
      headers: { authorization: 'Bearer t1' },
    });
    assert.equal(await res.text(), 'hello from /hello');
    assert.deepEqual(seen.at(-1), { path: '/hello', authorization: 'Bearer t1' });
  });

  test('a redirect to another origin is followed without the Authorization header', async () => {
    other = await otherUrl;
    seen.length = 0;
    const res = await outboundFetch(open)(`${await url}/to-other-origin`, {
      headers: { authorization: 'Bearer t1' },
    });
    assert.equal(await res.text(), 'landed');
    assert.deepEqual(seen.at(-1), { path: 'other/landing', authorization: undefined });
  });

  test('with redirect manual the redirect itself is returned', async () => {
    const res = await outboundFetch(open)(`${await url}/to-same-origin`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/hello');
  });
});
