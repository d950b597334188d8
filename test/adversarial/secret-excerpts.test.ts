// An error text of a remote server is kept as an excerpt (cut to a few hundred characters). A
// credential that the server echoes right where the cut falls must not survive in part.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { useTestService } from '../helpers/fixtures.ts';

describe('a credential cut in two by an error excerpt', () => {
  const fx = useTestService({ orgs: ['paid'], env: { SVC_ALLOW_PRIVATE_URLS: 'true' } });
  const token = `canary${randomBytes(16).toString('hex')}`;
  let padding = 0;
  let server: Server;
  let url = '';

  before(async () => {
    // Answers every request with a 500 whose text echoes the credential after `padding` bytes.
    server = createServer((_req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`${'x'.repeat(padding)}${token} and more text after it`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test('whatever the offset of the cut, no piece of the credential is in the test answer', async () => {
    const source = await fx.svc.call({
      method: 'POST',
      url: '/api/svc/sources',
      key: fx.org.apiKey,
      body: {
        organizationId: fx.org.organizationId,
        type: 'mcp',
        name: 'Echoing server',
        config: { transport: 'http', url },
        authType: 'bearer',
        authConfig: { token },
      },
    });
    assert.equal(source.status, 201, source.raw);
    let cutInside = 0;
    for (let offset = 500; offset <= 600; offset += 4) {
      padding = offset;
      const res = await fx.svc.call({
        method: 'POST',
        url: `/api/svc/sources/${source.body.id}/test`,
        key: fx.org.apiKey,
      });
      assert.equal(res.body.success, false, res.raw);
      const message: string = res.body.message;
      if (message.includes('xxxx') && !message.includes('and more text after it')) cutInside++;
      for (let n = 6; n <= token.length; n++) {
        for (const piece of [token.slice(0, n), token.slice(-n)]) {
          assert.ok(!message.includes(piece), `offset ${offset}: "${piece}" in ${message}`);
        }
      }
    }
    // The offsets above put the cut inside the credential for some of them.
    assert.ok(cutInside > 0, 'the excerpt was cut at some offset');
  });
});
