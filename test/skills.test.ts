import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Reply, startTestService, type TestService } from './helpers/service.ts';

type Org = { organizationId: string; apiKey: string };

function assertValidation(res: Reply, path: string) {
  assert.equal(res.status, 400, res.raw);
  assert.equal(res.body.error.code, 'validation_error');
  const paths = res.body.error.details.map((d: { path: string }) => d.path);
  assert.ok(paths.includes(path), `expected a detail at ${path}, got ${paths.join(', ')}`);
}

describe('skills', () => {
  let svc: TestService;
  let org: Org;
  let other: Org;

  const create = (o: Org, body: Record<string, unknown>) =>
    svc.call({
      method: 'POST',
      url: '/api/svc/skills',
      key: o.apiKey,
      body: { organizationId: o.organizationId, ...body },
    });
  const list = (o: Org) =>
    svc.call({ method: 'GET', url: `/api/svc/skills?organizationId=${o.organizationId}`, key: o.apiKey });
  const get = (o: Org, id: string) =>
    svc.call({ method: 'GET', url: `/api/svc/skills/${id}`, key: o.apiKey });
  const patch = (o: Org, id: string, body: unknown) =>
    svc.call({ method: 'PATCH', url: `/api/svc/skills/${id}`, key: o.apiKey, body });
  const del = (o: Org, id: string) =>
    svc.call({ method: 'DELETE', url: `/api/svc/skills/${id}`, key: o.apiKey });

  before(async () => {
    svc = await startTestService();
    // The paid plan's 300 requests a minute leave room for every test below.
    org = await svc.createOrg('paid');
    other = await svc.createOrg('paid');
  });
  after(() => svc.close());

  test('a skill with every field is created, read, listed, updated and deleted', async () => {
    const created = await create(org, {
      name: 'Market Brief',
      content: '# Brief\nSummarise the markets.',
      category: 'finance',
      description: 'A daily market summary',
      frontmatter: { author: 'Ada', requiredSources: ['stock-api'], tags: ['markets', 'daily'] },
      iconUrl: 'https://example.com/icon.png',
      isPublic: true,
      isUserInvocable: false,
      slug: 'market-brief',
    });
    assert.equal(created.status, 201, created.raw);
    const skill = created.body;
    assert.match(skill.id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(
      { ...skill, id: undefined, createdAt: undefined, updatedAt: undefined },
      {
        id: undefined,
        organizationId: org.organizationId,
        name: 'Market Brief',
        slug: 'market-brief',
        content: '# Brief\nSummarise the markets.',
        category: 'finance',
        description: 'A daily market summary',
        frontmatter: { author: 'Ada', requiredSources: ['stock-api'], tags: ['markets', 'daily'] },
        iconUrl: 'https://example.com/icon.png',
        isPublic: true,
        isUserInvocable: false,
        version: 1,
        createdAt: undefined,
        updatedAt: undefined,
      },
    );
    assert.equal(new Date(skill.createdAt).toISOString(), skill.createdAt);
    assert.equal(skill.updatedAt, skill.createdAt);

    const read = await get(org, skill.id);
    assert.equal(read.status, 200, read.raw);
    assert.deepEqual(read.body, skill);

    const listed = await list(org);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.find((s: { id: string }) => s.id === skill.id),
      skill,
    );

    const updated = await patch(org, skill.id, {
      name: 'Market Brief v2',
      content: 'New instructions',
      category: null,
      description: 'Changed',
      frontmatter: { tags: ['x'] },
      isPublic: false,
      isUserInvocable: true,
    });
    assert.equal(updated.status, 200, updated.raw);
    assert.equal(updated.body.name, 'Market Brief v2');
    assert.equal(updated.body.content, 'New instructions');
    assert.equal('category' in updated.body, false, 'a cleared field is omitted, not null');
    assert.equal(updated.body.description, 'Changed');
    assert.deepEqual(updated.body.frontmatter, { tags: ['x'] });
    assert.equal(updated.body.isPublic, false);
    assert.equal(updated.body.isUserInvocable, true);
    assert.equal(updated.body.slug, 'market-brief', 'renaming keeps the slug');
    assert.equal(updated.body.iconUrl, 'https://example.com/icon.png');
    assert.equal(updated.body.version, 2);
    assert.deepEqual((await get(org, skill.id)).body, updated.body);

    const deleted = await del(org, skill.id);
    assert.equal(deleted.status, 204);
    assert.equal(deleted.raw, '');
    const gone = await get(org, skill.id);
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.body, { error: { code: 'not_found', message: 'Skill not found' } });
    assert.equal((await del(org, skill.id)).status, 404);
  });

  test('a minimal skill gets the defaults and omits the optional fields it does not have', async () => {
    const res = await create(org, { name: 'Plain', content: 'Do it.' });
    assert.equal(res.status, 201, res.raw);
    assert.equal(res.body.isPublic, false);
    assert.equal(res.body.isUserInvocable, true);
    assert.equal(res.body.version, 1);
    for (const field of ['category', 'description', 'frontmatter', 'iconUrl']) {
      assert.equal(field in res.body, false, `${field} is omitted`);
    }
  });

  test('the list shows only the own organization, newest first', async () => {
    const fresh = await svc.createOrg();
    const ids: string[] = [];
    for (const name of ['first', 'second', 'third']) {
      const res = await create(fresh, { name, content: 'x' });
      assert.equal(res.status, 201, res.raw);
      ids.push(res.body.id);
    }
    await create(other, { name: 'not theirs', content: 'x' });
    const res = await list(fresh);
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.body.map((s: { id: string }) => s.id),
      ids.reverse(),
    );
  });

  test('listing another organization with this key is refused with 401', async () => {
    const res = await svc.call({
      method: 'GET',
      url: `/api/svc/skills?organizationId=${other.organizationId}`,
      key: org.apiKey,
    });
    assert.equal(res.status, 401);
  });

  test('the version goes up only when the content changes', async () => {
    const { body: skill } = await create(org, { name: 'Versioned', content: 'one' });
    assert.equal(skill.version, 1);
    assert.equal((await patch(org, skill.id, { name: 'Renamed' })).body.version, 1);
    assert.equal((await patch(org, skill.id, { content: 'one' })).body.version, 1, 'same content');
    assert.equal((await patch(org, skill.id, { content: 'two' })).body.version, 2);
    assert.equal((await patch(org, skill.id, { content: 'three', isPublic: true })).body.version, 3);
    assert.equal((await get(org, skill.id)).body.version, 3);
  });

  test('a slug is generated from the name and a suffix is added when it is taken', async () => {
    const a = await create(org, { name: 'Crème Brûlée: Daily Recipe!', content: 'x' });
    assert.equal(a.body.slug, 'creme-brulee-daily-recipe');
    const b = await create(org, { name: 'Crème brûlée daily recipe', content: 'x' });
    assert.equal(b.body.slug, 'creme-brulee-daily-recipe-2');
    const c = await create(org, { name: 'creme brulee daily recipe', content: 'x' });
    assert.equal(c.body.slug, 'creme-brulee-daily-recipe-3');
    const symbols = await create(org, { name: '!!!', content: 'x' });
    assert.equal(symbols.status, 201);
    assert.match(symbols.body.slug, /^skill(-\d+)?$/);
  });

  test('the same slug may be used by two organizations', async () => {
    const mine = await create(org, { name: 'Shared slug', content: 'x', slug: 'shared-slug' });
    const theirs = await create(other, { name: 'Shared slug', content: 'x', slug: 'shared-slug' });
    assert.equal(mine.status, 201);
    assert.equal(theirs.status, 201);
  });

  test('an explicit slug that already exists in the organization is a 409 naming it', async () => {
    assert.equal((await create(org, { name: 'One', content: 'x', slug: 'taken-slug' })).status, 201);
    const res = await create(org, { name: 'Two', content: 'x', slug: 'taken-slug' });
    assert.equal(res.status, 409, res.raw);
    assert.equal(res.body.error.code, 'conflict');
    assert.match(res.body.error.message, /taken-slug/);
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ['a missing name', { content: 'x' }, '/body/name'],
    ['a missing content', { name: 'x' }, '/body/content'],
    ['an empty content', { name: 'x', content: '' }, '/body/content'],
    ['a name of 256 characters', { name: 'n'.repeat(256), content: 'x' }, '/body/name'],
    ['a content above 100000 characters', { name: 'x', content: 'c'.repeat(100_001) }, '/body/content'],
    ['a slug with capitals', { name: 'x', content: 'x', slug: 'Bad-Slug' }, '/body/slug'],
    ['a slug with a double hyphen', { name: 'x', content: 'x', slug: 'bad--slug' }, '/body/slug'],
    [
      'an unknown frontmatter key',
      { name: 'x', content: 'x', frontmatter: { owner: 'me' } },
      '/body/frontmatter/owner',
    ],
    [
      'a tag above 50 characters',
      { name: 'x', content: 'x', frontmatter: { tags: ['t'.repeat(51)] } },
      '/body/frontmatter/tags/0',
    ],
    [
      'an iconUrl that is not http(s)',
      { name: 'x', content: 'x', iconUrl: 'javascript:alert(1)' },
      '/body/iconUrl',
    ],
    ['an iconUrl that is not a URL', { name: 'x', content: 'x', iconUrl: 'not a url' }, '/body/iconUrl'],
    ['an unknown body field', { name: 'x', content: 'x', owner: 'me' }, '/body/owner'],
    ['a name that is a number', { name: 42, content: 'x' }, '/body/name'],
    ['isPublic as a string', { name: 'x', content: 'x', isPublic: 'true' }, '/body/isPublic'],
    [
      'tags that are not an array',
      { name: 'x', content: 'x', frontmatter: { tags: 'a,b' } },
      '/body/frontmatter/tags',
    ],
  ];
  for (const [what, body, path] of invalid) {
    test(`creating a skill with ${what} is a 400 naming ${path}`, async () => {
      assertValidation(await create(org, body), path);
    });
  }

  test('an update with a wrong type, an unknown field or the slug is a 400 naming the field', async () => {
    const { body: skill } = await create(org, { name: 'Strict', content: 'x' });
    assertValidation(await patch(org, skill.id, { content: 7 }), '/body/content');
    assertValidation(await patch(org, skill.id, { name: '' }), '/body/name');
    assertValidation(await patch(org, skill.id, { slug: 'new-slug' }), '/body/slug');
    assertValidation(await patch(org, skill.id, { frontmatter: { bogus: true } }), '/body/frontmatter/bogus');
    assert.equal((await get(org, skill.id)).body.name, 'Strict');
  });

  test('a skill id that is not a uuid is a 400 naming the path parameter', async () => {
    assertValidation(await get(org, 'nope'), '/path/skillId');
  });

  test("another organization's skill answers 404 on get, patch and delete and stays unchanged", async () => {
    const { body: skill } = await create(org, { name: 'Private', content: 'mine' });
    for (const res of [
      await get(other, skill.id),
      await patch(other, skill.id, { content: 'stolen' }),
      await del(other, skill.id),
    ]) {
      assert.equal(res.status, 404, res.raw);
      assert.deepEqual(res.body, { error: { code: 'not_found', message: 'Skill not found' } });
    }
    const unknown = await get(org, '00000000-0000-4000-8000-000000000000');
    assert.equal(unknown.status, 404);
    assert.deepEqual((await get(org, skill.id)).body, skill);
  });
});
