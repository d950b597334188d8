// A task's run checks as the API saves them: the cost cap, the output schema (compiled when
// saved, its size, depth and references bounded) and the required tools; null clears each.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadModelCatalog, SHIPPED_CATALOG_FILE } from '../src/domain/models.ts';
import { newTask, type Org, unlimited } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';

const SCHEMA = {
  type: 'object',
  properties: { title: { type: 'string' }, items: { type: 'array', items: { $ref: '#/definitions/item' } } },
  required: ['title'],
  definitions: { item: { type: 'object', properties: { n: { type: 'integer', minimum: 0 } } } },
};

describe('run checks saved with a task', () => {
  let svc: TestService;
  let org: Org;
  before(async () => {
    svc = await startTestService();
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(() => svc.close());

  const create = (extra: Record<string, unknown>) =>
    svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: org.apiKey,
      body: {
        organizationId: org.organizationId,
        name: 'Checked',
        prompt: 'Report',
        schedule: 'daily',
        ...extra,
      },
    });
  const patch = (id: string, body: Record<string, unknown>) =>
    svc.call({ method: 'PATCH', url: `/api/svc/tasks/${id}`, key: org.apiKey, body });
  const detailAt = (res: { body: any }, path: string) =>
    (res.body.error?.details ?? []).find((d: { path: string }) => d.path === path)?.message as
      | string
      | undefined;

  test('a task is created with a cost cap, an output schema and required tools, and shows them', async () => {
    const res = await create({
      maxCostCentsPerRun: 2.5,
      outputSchema: SCHEMA,
      requiredTools: ['builtin__current_time', 'fetch_url'],
    });
    assert.equal(res.status, 201, res.raw);
    assert.equal(res.body.maxCostCentsPerRun, 2.5);
    assert.deepEqual(res.body.outputSchema, SCHEMA);
    assert.deepEqual(res.body.requiredTools, ['builtin__current_time', 'fetch_url']);
    const got = await svc.call({ method: 'GET', url: `/api/svc/tasks/${res.body.id}`, key: org.apiKey });
    assert.equal(got.body.maxCostCentsPerRun, 2.5);
    assert.deepEqual(got.body.outputSchema, SCHEMA);
    assert.deepEqual(got.body.requiredTools, ['builtin__current_time', 'fetch_url']);
  });

  test('a task without checks shows none of the fields', async () => {
    const task = await newTask(svc, org);
    for (const field of ['maxCostCentsPerRun', 'outputSchema', 'requiredTools'])
      assert.equal(field in task, false, field);
  });

  test('PATCH sets each check, leaves the others as they are, and null clears it', async () => {
    const task = await newTask(svc, org);
    let res = await patch(task.id, { maxCostCentsPerRun: 0 });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.maxCostCentsPerRun, 0);
    res = await patch(task.id, { outputSchema: { type: 'array' }, requiredTools: ['a'] });
    assert.equal(res.body.maxCostCentsPerRun, 0);
    assert.deepEqual(res.body.outputSchema, { type: 'array' });
    res = await patch(task.id, { maxCostCentsPerRun: null, outputSchema: null });
    assert.equal(res.status, 200, res.raw);
    assert.equal('maxCostCentsPerRun' in res.body, false);
    assert.equal('outputSchema' in res.body, false);
    assert.deepEqual(res.body.requiredTools, ['a']);
    res = await patch(task.id, { requiredTools: [] });
    assert.equal('requiredTools' in res.body, false, 'an empty list requires nothing');
  });

  test('a negative or huge cost cap, and a bad required tools list, are 400s at their fields', async () => {
    for (const [extra, path] of [
      [{ maxCostCentsPerRun: -1 }, '/body/maxCostCentsPerRun'],
      [{ maxCostCentsPerRun: 1_000_001 }, '/body/maxCostCentsPerRun'],
      [{ maxCostCentsPerRun: '5' }, '/body/maxCostCentsPerRun'],
      [{ requiredTools: ['a', 'a'] }, '/body/requiredTools'],
      [{ requiredTools: ['with space'] }, '/body/requiredTools/0'],
      [{ requiredTools: ['x'.repeat(129)] }, '/body/requiredTools/0'],
      [{ requiredTools: Array.from({ length: 21 }, (_, i) => `t${i}`) }, '/body/requiredTools'],
      [{ outputSchema: 'not an object' }, '/body/outputSchema'],
    ] as const) {
      const res = await create(extra);
      assert.equal(res.status, 400, `${JSON.stringify(extra)}: ${res.raw}`);
      assert.equal(res.body.error.code, 'validation_error');
      assert.ok(detailAt(res, path), `${JSON.stringify(extra)} at ${path}: ${res.raw}`);
    }
  });

  test('a schema that does not compile is a 400 at /body/outputSchema, on create and on PATCH', async () => {
    const bad = await create({ outputSchema: { type: 'nothing' } });
    assert.equal(bad.status, 400, bad.raw);
    assert.match(detailAt(bad, '/body/outputSchema') ?? '', /is not a valid JSON Schema/);
    const missingRef = await create({ outputSchema: { $ref: '#/definitions/absent' } });
    assert.equal(missingRef.status, 400, missingRef.raw);
    assert.match(detailAt(missingRef, '/body/outputSchema') ?? '', /is not a valid JSON Schema.*absent/);
    const task = await newTask(svc, org);
    const res = await patch(task.id, { outputSchema: { properties: { a: { minimum: 'one' } } } });
    assert.equal(res.status, 400, res.raw);
    assert.ok(detailAt(res, '/body/outputSchema'));
    const unchanged = await svc.call({ method: 'GET', url: `/api/svc/tasks/${task.id}`, key: org.apiKey });
    assert.equal('outputSchema' in unchanged.body, false);
  });

  test('a $schema of draft-07 is taken, and one naming another draft is refused', async () => {
    const draft7 = await create({
      outputSchema: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' },
    });
    assert.equal(draft7.status, 201, draft7.raw);
    const other = await create({
      outputSchema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object' },
    });
    assert.equal(other.status, 400, other.raw);
    assert.match(detailAt(other, '/body/outputSchema') ?? '', /is not a valid JSON Schema/);
  });

  test('a remote $ref is refused, naming it, and nothing is fetched', async () => {
    for (const ref of ['https://example.com/schema.json', 'other.json#/x', '//host/x']) {
      const res = await create({ outputSchema: { type: 'object', properties: { a: { $ref: ref } } } });
      assert.equal(res.status, 400, res.raw);
      assert.match(detailAt(res, '/body/outputSchema') ?? '', /only references within the schema/);
    }
  });

  test('a schema over 64 KiB or nested deeper than 32 levels is refused, naming the bound', async () => {
    const large = { type: 'object', description: 'x'.repeat(64 * 1024) };
    const tooLarge = await create({ outputSchema: large });
    assert.equal(tooLarge.status, 400, tooLarge.raw);
    assert.match(detailAt(tooLarge, '/body/outputSchema') ?? '', /more than the 64 KiB/);
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 32; i++) deep = { type: 'array', items: deep };
    const tooDeep = await create({ outputSchema: deep });
    assert.equal(tooDeep.status, 400, tooDeep.raw);
    assert.match(detailAt(tooDeep, '/body/outputSchema') ?? '', /more than 32 levels/);
  });

  test('a problem of the schema and one of another field are reported together', async () => {
    const res = await create({ outputSchema: { type: 'nothing' }, timezone: 'Mars/Olympus' });
    assert.equal(res.status, 400, res.raw);
    assert.ok(detailAt(res, '/body/outputSchema'));
    assert.ok(detailAt(res, '/body/timezone'));
  });
});

describe("the catalog's supportsStructuredOutput", () => {
  const shipped = JSON.parse(readFileSync(SHIPPED_CATALOG_FILE, 'utf8')) as Record<string, unknown>[];
  const dir = mkdtempSync(join(tmpdir(), 'svc-models-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  let written = 0;
  const write = (entries: unknown) => {
    const file = join(dir, `models-${++written}.json`);
    writeFileSync(file, JSON.stringify(entries));
    return file;
  };

  test('is optional (an entry without it takes no schema) and a boolean', () => {
    const without = shipped.map(({ supportsStructuredOutput: _, ...entry }) => entry);
    const catalog = loadModelCatalog(write(without));
    assert.equal(catalog.list()[0]?.supportsStructuredOutput, undefined);
    const bad = shipped.map((entry, i) => (i === 2 ? { ...entry, supportsStructuredOutput: 'yes' } : entry));
    assert.throws(() => loadModelCatalog(write(bad)), /\/2\/supportsStructuredOutput must be boolean/);
  });

  test('the shipped catalog says it for every model', () => {
    for (const entry of shipped)
      assert.equal(typeof entry.supportsStructuredOutput, 'boolean', String(entry.name));
  });
});
