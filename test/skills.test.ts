import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertValidation } from './helpers/assertions.ts';
import { resourceCalls, useTestService } from './helpers/fixtures.ts';

describe('skills', () => {
  // The paid plan's 300 requests a minute leave room for every test below.
  const fx = useTestService({ orgs: ['paid', 'paid'] });
  const { create, list, get, patch, del } = resourceCalls(fx, 'skills');

  test('a skill with every field is created, read, listed, updated and deleted', async () => {
    const created = await create(fx.org, {
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
        organizationId: fx.org.organizationId,
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

    const read = await get(fx.org, skill.id);
    assert.equal(read.status, 200, read.raw);
    assert.deepEqual(read.body, skill);

    const listed = await list(fx.org);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.find((s: { id: string }) => s.id === skill.id),
      skill,
    );

    const updated = await patch(fx.org, skill.id, {
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
    assert.deepEqual((await get(fx.org, skill.id)).body, updated.body);

    const deleted = await del(fx.org, skill.id);
    assert.equal(deleted.status, 204);
    assert.equal(deleted.raw, '');
    const gone = await get(fx.org, skill.id);
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.body, { error: { code: 'not_found', message: 'Skill not found' } });
    assert.equal((await del(fx.org, skill.id)).status, 404);
  });

  test('a minimal skill gets the defaults and omits the optional fields it does not have', async () => {
    const res = await create(fx.org, { name: 'Plain', content: 'Do it.' });
    assert.equal(res.status, 201, res.raw);
    assert.equal(res.body.isPublic, false);
    assert.equal(res.body.isUserInvocable, true);
    assert.equal(res.body.version, 1);
    for (const field of ['category', 'description', 'frontmatter', 'iconUrl']) {
      assert.equal(field in res.body, false, `${field} is omitted`);
    }
  });

  test('the list shows only the own organization, newest first', async () => {
    const fresh = await fx.svc.createOrg();
    const ids: string[] = [];
    for (const name of ['first', 'second', 'third']) {
      const res = await create(fresh, { name, content: 'x' });
      assert.equal(res.status, 201, res.raw);
      ids.push(res.body.id);
    }
    await create(fx.other, { name: 'not theirs', content: 'x' });
    const res = await list(fresh);
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.body.map((s: { id: string }) => s.id),
      ids.reverse(),
    );
  });

  test('listing another organization with this key is refused with 401', async () => {
    const res = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/skills?organizationId=${fx.other.organizationId}`,
      key: fx.org.apiKey,
    });
    assert.equal(res.status, 401);
  });

  test('the version goes up only when the content changes', async () => {
    const { body: skill } = await create(fx.org, { name: 'Versioned', content: 'one' });
    assert.equal(skill.version, 1);
    assert.equal((await patch(fx.org, skill.id, { name: 'Renamed' })).body.version, 1);
    assert.equal((await patch(fx.org, skill.id, { content: 'one' })).body.version, 1, 'same content');
    assert.equal((await patch(fx.org, skill.id, { content: 'two' })).body.version, 2);
    assert.equal((await patch(fx.org, skill.id, { content: 'three', isPublic: true })).body.version, 3);
    assert.equal((await get(fx.org, skill.id)).body.version, 3);
  });

  test('a slug is generated from the name and a suffix is added when it is taken', async () => {
    const a = await create(fx.org, { name: 'Crème Brûlée: Daily Recipe!', content: 'x' });
    assert.equal(a.body.slug, 'creme-brulee-daily-recipe');
    const b = await create(fx.org, { name: 'Crème brûlée daily recipe', content: 'x' });
    assert.equal(b.body.slug, 'creme-brulee-daily-recipe-2');
    const c = await create(fx.org, { name: 'creme brulee daily recipe', content: 'x' });
    assert.equal(c.body.slug, 'creme-brulee-daily-recipe-3');
    const symbols = await create(fx.org, { name: '!!!', content: 'x' });
    assert.equal(symbols.status, 201);
    assert.match(symbols.body.slug, /^skill(-\d+)?$/);
  });

  test('the same slug may be used by two organizations', async () => {
    const mine = await create(fx.org, { name: 'Shared slug', content: 'x', slug: 'shared-slug' });
    const theirs = await create(fx.other, { name: 'Shared slug', content: 'x', slug: 'shared-slug' });
    assert.equal(mine.status, 201);
    assert.equal(theirs.status, 201);
  });

  test('an explicit slug that already exists in the organization is a 409 naming it', async () => {
    assert.equal((await create(fx.org, { name: 'One', content: 'x', slug: 'taken-slug' })).status, 201);
    const res = await create(fx.org, { name: 'Two', content: 'x', slug: 'taken-slug' });
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
      assertValidation(await create(fx.org, body), path);
    });
  }

  test('an update with a wrong type, an unknown field or the slug is a 400 naming the field', async () => {
    const { body: skill } = await create(fx.org, { name: 'Strict', content: 'x' });
    assertValidation(await patch(fx.org, skill.id, { content: 7 }), '/body/content');
    assertValidation(await patch(fx.org, skill.id, { name: '' }), '/body/name');
    assertValidation(await patch(fx.org, skill.id, { slug: 'new-slug' }), '/body/slug');
    assertValidation(
      await patch(fx.org, skill.id, { frontmatter: { bogus: true } }),
      '/body/frontmatter/bogus',
    );
    assert.equal((await get(fx.org, skill.id)).body.name, 'Strict');
  });

  test('a skill id that is not a uuid is a 400 naming the path parameter', async () => {
    assertValidation(await get(fx.org, 'nope'), '/path/skillId');
  });

  test("another organization's skill answers 404 on get, patch and delete and stays unchanged", async () => {
    const { body: skill } = await create(fx.org, { name: 'Private', content: 'mine' });
    for (const res of [
      await get(fx.other, skill.id),
      await patch(fx.other, skill.id, { content: 'stolen' }),
      await del(fx.other, skill.id),
    ]) {
      assert.equal(res.status, 404, res.raw);
      assert.deepEqual(res.body, { error: { code: 'not_found', message: 'Skill not found' } });
    }
    const unknown = await get(fx.org, '00000000-0000-4000-8000-000000000000');
    assert.equal(unknown.status, 404);
    assert.deepEqual((await get(fx.org, skill.id)).body, skill);
  });
});
