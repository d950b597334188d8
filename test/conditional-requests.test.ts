import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ManualClock } from '../src/lib/clock.ts';
import { resourceCalls, useTestService } from './helpers/fixtures.ts';
import type { Reply } from './helpers/service.ts';

const clock = new ManualClock('2027-05-03T08:00:00Z');

describe('ETag, If-Match and If-None-Match on single resources', () => {
  const fx = useTestService({ orgs: ['paid'], clock });
  const resources = {
    tasks: { create: { name: 'Brief', prompt: 'Summarise' }, patch: (name: string) => ({ name }) },
    skills: { create: { name: 'Tone', content: 'Be brief.' }, patch: (name: string) => ({ name }) },
    sources: {
      create: {
        type: 'mcp',
        name: 'Files',
        config: { transport: 'http', url: 'https://mcp.example.com/mcp' },
        authType: 'basic',
        authConfig: { username: 'ada', password: 's3cret-value' },
      },
      patch: (name: string) => ({ name }),
    },
  } as const;
  const withHeaders = (r: ReturnType<typeof resourceCalls>, headers: Record<string, string>) => ({
    get: (id: string) =>
      fx.svc.call({ method: 'GET', url: `${urlOf(r)}/${id}`, key: fx.org.apiKey, headers }),
    patch: (id: string, body: unknown) =>
      fx.svc.call({ method: 'PATCH', url: `${urlOf(r)}/${id}`, key: fx.org.apiKey, body, headers }),
    del: (id: string) =>
      fx.svc.call({ method: 'DELETE', url: `${urlOf(r)}/${id}`, key: fx.org.apiKey, headers }),
  });
  const urls = new Map<object, string>();
  const urlOf = (r: object) => urls.get(r) as string;
  const calls = (name: keyof typeof resources) => {
    const r = resourceCalls(fx, name);
    urls.set(r, `/api/svc/${name}`);
    return r;
  };
  const created = async (
    name: keyof typeof resources,
  ): Promise<{ id: string; etag: string; r: ReturnType<typeof calls> }> => {
    const r = calls(name);
    const res = await r.create(fx.org, resources[name].create);
    assert.equal(res.status, 201, res.raw);
    const got = await r.get(fx.org, res.body.id);
    const etag = got.headers.etag;
    assert.equal(typeof etag, 'string', `${name}: GET carries an ETag`);
    return { id: res.body.id, etag: etag as string, r };
  };

  for (const name of Object.keys(resources) as (keyof typeof resources)[]) {
    test(`${name}: a stale If-Match is a 412 that changes nothing; the current tag lets PATCH and DELETE go on`, async () => {
      const { id, etag, r } = await created(name);
      assert.match(etag, /^"[0-9a-f]{32}"$/, 'a strong tag');
      assert.equal((await r.get(fx.org, id)).headers.etag, etag, 'the tag is stable while nothing changes');

      const ok = await withHeaders(r, { 'if-match': etag }).patch(id, resources[name].patch('Renamed'));
      assert.equal(ok.status, 200, ok.raw);
      const newTag = ok.headers.etag as string;
      assert.ok(newTag && newTag !== etag, 'the PATCH answer carries the new tag');
      const after = await r.get(fx.org, id);
      assert.equal(after.headers.etag, newTag, 'the PATCH answer tag is the GET tag');

      const stale = await withHeaders(r, { 'if-match': etag }).patch(
        id,
        resources[name].patch('Lost update'),
      );
      assert.equal(stale.status, 412, stale.raw);
      assert.equal(stale.body.error.code, 'precondition_failed');
      const unchanged = await r.get(fx.org, id);
      assert.equal(unchanged.body.name, 'Renamed');
      assert.equal(unchanged.raw, after.raw);

      const staleDelete = await withHeaders(r, { 'if-match': etag }).del(id);
      assert.equal(staleDelete.status, 412, staleDelete.raw);
      assert.equal((await r.get(fx.org, id)).status, 200, 'a refused DELETE deletes nothing');

      const weak = await withHeaders(r, { 'if-match': `W/${newTag}` }).del(id);
      assert.equal(weak.status, 412, 'If-Match compares strongly: a weak tag never matches');

      const deleted = await withHeaders(r, { 'if-match': `"0000", ${newTag}` }).del(id);
      assert.equal(deleted.status, 204, deleted.raw);
      assert.equal((await r.get(fx.org, id)).status, 404);
    });
  }

  test('If-Match: * matches any existing resource; a missing one is still a 404', async () => {
    const { id, r } = await created('tasks');
    const res = await withHeaders(r, { 'if-match': '*' }).patch(id, { name: 'Any' });
    assert.equal(res.status, 200, res.raw);
    assert.equal((await withHeaders(r, { 'if-match': '*' }).del(id)).status, 204);
    assert.equal((await withHeaders(r, { 'if-match': '*' }).del(id)).status, 404);
  });

  test('without If-Match, PATCH and DELETE behave as before', async () => {
    const { id, r } = await created('skills');
    assert.equal((await r.patch(fx.org, id, { name: 'Plain' })).status, 200);
    assert.equal((await r.del(fx.org, id)).status, 204);
  });

  test('the tag changes when the representation changes without a PATCH (a run of the task)', async () => {
    const { id, etag } = await created('tasks');
    const run = await fx.svc.call({ method: 'POST', url: `/api/svc/tasks/${id}/run`, key: fx.org.apiKey });
    assert.equal(run.status, 202, run.raw);
    const runGet = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/runs/${run.body.id}`,
      key: fx.org.apiKey,
    });
    assert.equal(typeof runGet.headers.etag, 'string', 'a run has a tag too');
    await fx.svc.testDb.db.query('UPDATE tasks SET name = $2 WHERE id = $1', [id, 'Changed elsewhere']);
    const after = await fx.svc.call({ method: 'GET', url: `/api/svc/tasks/${id}`, key: fx.org.apiKey });
    assert.notEqual(after.headers.etag, etag);
  });

  test('a task read again unchanged answers the same body and tag; changed behind the API, its next reads show it at once', async () => {
    const { id } = await created('tasks');
    const read = () => fx.svc.call({ method: 'GET', url: `/api/svc/tasks/${id}`, key: fx.org.apiKey });
    const list = async () =>
      (
        await fx.svc.call({
          method: 'GET',
          url: `/api/svc/tasks?organizationId=${fx.org.organizationId}&limit=100`,
          key: fx.org.apiKey,
        })
      ).body.find((t: { id: string }) => t.id === id);
    const [first, second] = [await read(), await read()];
    assert.equal(second.raw, first.raw);
    assert.equal(second.headers.etag, first.headers.etag);
    // As the scheduler and the worker write: plain SQL, no API call in between.
    await fx.svc.testDb.db.query('UPDATE tasks SET consecutive_failures = 2 WHERE id = $1', [id]);
    const changed = await read();
    assert.equal(changed.body.consecutiveFailures, 2);
    assert.notEqual(changed.headers.etag, first.headers.etag);
    assert.equal((await list()).consecutiveFailures, 2);
    await fx.svc.testDb.db.query('UPDATE tasks SET consecutive_failures = 0 WHERE id = $1', [id]);
    const back = await read();
    assert.equal(back.body.consecutiveFailures, 0);
    assert.equal(back.headers.etag, first.headers.etag, 'the same representation has the same tag');
    assert.equal((await list()).consecutiveFailures, 0);
    const expanded = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/tasks/${id}?expand=skills`,
      key: fx.org.apiKey,
    });
    assert.deepEqual(expanded.body.skills, []);
    assert.equal((await read()).raw, first.raw, 'an expanded answer leaves the task as it is');
  });

  test('two PATCHes with the same tag at once: exactly one wins, the other is a 412', async () => {
    const { id, etag, r } = await created('tasks');
    const answers: Reply[] = await Promise.all(
      ['First', 'Second'].map((n) => withHeaders(r, { 'if-match': etag }).patch(id, { name: n })),
    );
    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(statuses, [200, 412], answers.map((a) => a.raw).join('\n'));
    const winner = answers.find((a) => a.status === 200) as Reply;
    assert.equal((await r.get(fx.org, id)).body.name, winner.body.name);
  });

  test('If-None-Match with the current tag is a 304 without a body; a stale one gets the resource', async () => {
    const { id, etag, r } = await created('skills');
    const fresh = await withHeaders(r, { 'if-none-match': etag }).get(id);
    assert.equal(fresh.status, 304);
    assert.equal(fresh.raw, '');
    assert.equal(fresh.headers.etag, etag);
    const stale = await withHeaders(r, { 'if-none-match': '"00000000000000000000000000000000"' }).get(id);
    assert.equal(stale.status, 200);
    assert.equal(stale.body.id, id);
  });

  test('a GET with expand carries no tag: it is not the resource representation alone', async () => {
    const { id } = await created('tasks');
    const res = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/tasks/${id}?expand=skills`,
      key: fx.org.apiKey,
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.headers.etag, undefined);
  });
});
