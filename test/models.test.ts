import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { loadModelCatalog, SHIPPED_CATALOG_FILE } from '../src/domain/models.ts';
import { assertEnvelope, assertValidation } from './helpers/assertions.ts';
import { useTestService } from './helpers/fixtures.ts';
import { startTestService } from './helpers/service.ts';

const SPEC_FIELDS = [
  'id',
  'name',
  'provider',
  'routerModelId',
  'codingIndex',
  'intelligenceIndex',
  'contextLength',
  'outputSpeed',
  'powerTier',
  'supportsInternetSearch',
  'supportsToolCalling',
].sort();
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('models', () => {
  const fx = useTestService({ orgs: ['free'] });

  const list = () => fx.svc.call({ method: 'GET', url: '/api/svc/models', key: fx.org.apiKey });

  test('the list has at least 12 models from at least 4 providers, each with every spec field in range', async () => {
    const res = await list();
    assert.equal(res.status, 200, res.raw);
    assert.ok(res.body.length >= 12, `${res.body.length} models`);
    assert.ok(new Set(res.body.map((m: any) => m.provider)).size >= 4);
    for (const m of res.body) {
      assert.deepEqual(Object.keys(m).sort(), SPEC_FIELDS, `${m.name} has exactly the spec fields`);
      assert.match(m.id, UUID_RE);
      assert.match(m.routerModelId, /^[^/]+\/.+$/);
      assert.ok(m.intelligenceIndex >= 0 && m.intelligenceIndex <= 100, m.name);
      assert.ok(m.codingIndex >= 0 && m.codingIndex <= 100, m.name);
      assert.ok(Number.isInteger(m.powerTier) && m.powerTier >= 1 && m.powerTier <= 5, m.name);
      assert.ok(m.contextLength > 0 && m.outputSpeed > 0, m.name);
      assert.equal(typeof m.supportsInternetSearch, 'boolean');
      assert.equal(typeof m.supportsToolCalling, 'boolean');
    }
    assert.equal(new Set(res.body.map((m: any) => m.id)).size, res.body.length, 'ids are unique');
  });

  test('model ids are the same across two service starts', async () => {
    const other = await startTestService();
    try {
      const o = await other.createOrg();
      const again = await other.call({ method: 'GET', url: '/api/svc/models', key: o.apiKey });
      assert.deepEqual(
        again.body.map((m: any) => m.id),
        (await list()).body.map((m: any) => m.id),
      );
    } finally {
      await other.close();
    }
  });

  test('a model is fetched by its id', async () => {
    const first = (await list()).body[3];
    const res = await fx.svc.call({ method: 'GET', url: `/api/svc/models/${first.id}`, key: fx.org.apiKey });
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body, first);
  });

  test('an unknown model id is a 404 not_found', async () => {
    const res = await fx.svc.call({
      method: 'GET',
      url: '/api/svc/models/00000000-0000-4000-8000-000000000000',
      key: fx.org.apiKey,
    });
    assertEnvelope(res, 404, 'not_found');
  });

  test('a model id that is not a uuid is a 400 naming the parameter', async () => {
    const res = await fx.svc.call({ method: 'GET', url: '/api/svc/models/gpt-4o', key: fx.org.apiKey });
    assertValidation(res, '/path/modelId');
    assert.equal(res.body.error.details[0].path, '/path/modelId');
  });

  test('the models list requires an API key', async () => {
    assertEnvelope(await fx.svc.call({ method: 'GET', url: '/api/svc/models' }), 401, 'unauthorized');
  });
});

describe('model catalog file', () => {
  const shipped = JSON.parse(readFileSync(SHIPPED_CATALOG_FILE, 'utf8')) as any[];
  const dir = mkdtempSync(join(tmpdir(), 'svc-models-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, content: string) => {
    const file = join(dir, name);
    writeFileSync(file, content);
    return file;
  };

  test('the shipped catalog has exactly one default, a cheap tool-calling model', () => {
    const catalog = loadModelCatalog();
    assert.equal(shipped.filter((m) => m.default === true).length, 1);
    assert.equal(catalog.defaultModel.supportsToolCalling, true);
    const prices = catalog.list().map((m) => m.outputCentsPerMillionTokens);
    const median = [...prices].sort((a, b) => a - b)[Math.floor(prices.length / 2)] ?? 0;
    assert.ok(catalog.defaultModel.outputCentsPerMillionTokens <= median);
  });

  test('models are found by uuid or by router id', () => {
    const catalog = loadModelCatalog();
    const m = catalog.list()[0];
    assert.ok(m);
    assert.equal(catalog.find(m.id), m);
    assert.equal(catalog.find(m.id.toUpperCase()), m);
    assert.equal(catalog.find(m.routerModelId), m);
    assert.equal(catalog.find('nobody/nothing'), undefined);
  });

  test("an operator's valid file replaces the shipped catalog", () => {
    const file = write(
      'ok.json',
      JSON.stringify(shipped.slice(0, 3).map((m, i) => ({ ...m, default: i === 2 }))),
    );
    const catalog = loadModelCatalog(file);
    assert.equal(catalog.list().length, 3);
    assert.equal(catalog.defaultModel.id, shipped[2].id);
  });

  const bad: [string, string, RegExp][] = [
    [
      'a duplicate id',
      JSON.stringify([...shipped, { ...shipped[1], routerModelId: 'x/y', default: false }]),
      /duplicate id/,
    ],
    ['two defaults', JSON.stringify(shipped.map((m, i) => ({ ...m, default: i < 2 }))), /exactly one/],
    ['no default', JSON.stringify(shipped.map((m) => ({ ...m, default: false }))), /exactly one/],
    [
      'an intelligenceIndex of 120',
      JSON.stringify(shipped.map((m, i) => (i === 0 ? { ...m, intelligenceIndex: 120 } : m))),
      /\/0\/intelligenceIndex must be <= 100/,
    ],
    ['text that is not JSON', '{ "models": [', /not valid JSON/],
    ['an empty list', '[]', /must NOT have fewer than 1 items/],
  ];
  for (const [name, content, problem] of bad) {
    test(`a file with ${name} fails loading with a message naming the file`, () => {
      const file = write(`${name.replace(/\W+/g, '-')}.json`, content);
      assert.throws(
        () => loadModelCatalog(file),
        (err: Error) => {
          assert.ok(err.message.startsWith(`SVC_MODELS_FILE ${file}: `), err.message);
          assert.match(err.message, problem);
          assert.ok(!err.message.includes('\n'), 'one line');
          return true;
        },
      );
    });
  }

  test('a missing file fails loading with a message naming the file', () => {
    const file = join(dir, 'absent.json');
    assert.throws(
      () => loadModelCatalog(file),
      new RegExp(`SVC_MODELS_FILE ${file}: cannot be read \\(ENOENT\\)`),
    );
  });

  test('a bad SVC_MODELS_FILE fails service startup', async () => {
    const file = write('startup.json', '[]');
    await assert.rejects(
      startTestService({ env: { SVC_MODELS_FILE: file } }),
      /SVC_MODELS_FILE .*startup\.json/,
    );
  });
});
