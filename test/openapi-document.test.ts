// Walks the served OpenAPI document: every operation is named, tagged, described, and declares
// the errors and the response headers it can answer with; and what it declares is what the
// service sends.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RESPONSE_HEADERS } from '../src/http/plugins/openapi-document.ts';
import { startTestService, type TestService } from './helpers/service.ts';

interface Response {
  description?: string;
  headers?: Record<string, { $ref?: string }>;
  content?: Record<string, { schema?: { $ref?: string } }>;
}
interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  security?: unknown[];
  parameters?: { in: string; name: string }[];
  requestBody?: unknown;
  responses: Record<string, Response>;
}
interface Doc {
  info: { contact?: { name?: string; url?: string }; license?: { name?: string } };
  servers?: { url: string }[];
  tags: { name: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; headers: Record<string, { schema?: unknown }> };
}

/** Each operation of the document with its path and method. */
function operations(doc: Doc): { path: string; method: string; op: Operation; name: string }[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({
      path,
      method,
      op,
      name: `${method.toUpperCase()} ${path}`,
    })),
  );
}

const isApiKeyOperation = (path: string, op: Operation) =>
  path.startsWith('/api/svc/') && (op.security === undefined || op.security.length > 0);
const headersOf = (r: Response) => Object.keys(r.headers ?? {});

describe('the OpenAPI document, operation by operation', () => {
  let svc: TestService;
  let doc: Doc;
  before(async () => {
    svc = await startTestService();
    const res = await svc.call({ method: 'GET', url: '/api/svc/openapi.json' });
    assert.equal(res.status, 200);
    doc = res.body;
  });
  after(() => svc.close());

  test('names the service, whom to contact, its licence and its server', () => {
    assert.ok(doc.info.contact?.name && doc.info.contact.url);
    assert.ok(doc.info.license?.name);
    assert.equal(doc.servers?.[0]?.url, svc.config.publicUrl);
  });

  test('every operation has a unique operationId in camelCase, a summary and a description', () => {
    const seen = new Set<string>();
    for (const { op, name } of operations(doc)) {
      assert.match(op.operationId ?? '', /^[a-z][a-zA-Z]+$/, `${name} operationId`);
      assert.ok(!seen.has(op.operationId ?? ''), `${name}: ${op.operationId} is used twice`);
      seen.add(op.operationId ?? '');
      assert.ok(op.summary?.trim(), `${name} summary`);
      assert.ok(op.description?.trim(), `${name} description`);
      assert.notEqual(op.description, op.summary, `${name}: the description says more than the summary`);
    }
    for (const id of ['listTasks', 'createTask', 'getTask', 'updateTask', 'deleteTask', 'runTask']) {
      assert.ok(seen.has(id), id);
    }
    for (const id of ['cancelRun', 'replayRun', 'listTaskSlots', 'previewSchedule'])
      assert.ok(seen.has(id), id);
  });

  test('every operation has one tag, every tag is declared with a description, and tasks come first', () => {
    const declared = doc.tags.map((t) => t.name);
    assert.equal(declared[0], 'tasks');
    assert.equal(declared[1], 'runs');
    for (const tag of doc.tags) assert.ok(tag.description?.trim(), `tag ${tag.name} is described`);
    const used = new Set<string>();
    for (const { op, name } of operations(doc)) {
      assert.equal(op.tags?.length, 1, `${name} has one tag`);
      assert.ok(declared.includes(op.tags?.[0] ?? ''), `${name}: tag ${op.tags?.[0]} is declared`);
      used.add(op.tags?.[0] ?? '');
    }
    assert.deepEqual([...used].sort(), [...declared].sort(), 'every declared tag is used');
  });

  test('every operation declares the errors it can answer, each described, in the one envelope', () => {
    for (const { path, method, op, name } of operations(doc)) {
      const statuses = Object.keys(op.responses);
      const expect = ['500', '503'];
      if (isApiKeyOperation(path, op)) expect.push('401', '429');
      if (path.startsWith('/api/admin/')) expect.push('401');
      if (path.includes('{')) expect.push('400', '404');
      if (op.requestBody) expect.push('400', '413', '415');
      if (['post', 'put', 'patch', 'delete'].includes(method)) expect.push('400', '413', '415');
      for (const status of expect) assert.ok(statuses.includes(status), `${name} declares ${status}`);
      for (const [status, response] of Object.entries(op.responses)) {
        assert.ok(response.description?.trim(), `${name} ${status} is described`);
        if (Number(status) >= 400) {
          assert.equal(
            response.content?.['application/json']?.schema?.$ref,
            '#/components/schemas/ErrorEnvelope',
            `${name} ${status}`,
          );
        }
      }
    }
  });

  test('every response declares the headers sent with it: request id, rate limit, Retry-After', () => {
    for (const { path, op, name } of operations(doc)) {
      for (const [status, response] of Object.entries(op.responses)) {
        const headers = headersOf(response);
        assert.ok(headers.includes('X-Request-Id'), `${name} ${status} X-Request-Id`);
        for (const h of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) {
          assert.equal(headers.includes(h), isApiKeyOperation(path, op), `${name} ${status} ${h}`);
        }
        assert.equal(headers.includes('Retry-After'), ['429', '503'].includes(status), `${name} ${status}`);
        for (const ref of Object.values(response.headers ?? {})) {
          const header = ref.$ref?.replace('#/components/headers/', '') ?? '';
          assert.ok(doc.components.headers[header]?.schema, `${name} ${status}: ${ref.$ref} is declared`);
        }
      }
    }
    assert.deepEqual(Object.keys(doc.components.headers).sort(), RESPONSE_HEADERS.map((h) => h.name).sort());
  });

  test('the resources are named components, and the operations answering one refer to it', () => {
    for (const name of ['Task', 'Skill', 'Source', 'Run', 'RunWithDeliveries', 'Model', 'ErrorEnvelope']) {
      assert.ok(doc.components.schemas[name], `components.schemas.${name}`);
    }
    const answer = (path: string, method: string, status: string) =>
      doc.paths[path]?.[method]?.responses[status]?.content?.['application/json']?.schema?.$ref;
    assert.equal(answer('/api/svc/tasks/{taskId}', 'get', '200'), '#/components/schemas/Task');
    assert.equal(answer('/api/svc/tasks', 'post', '201'), '#/components/schemas/Task');
    assert.equal(answer('/api/svc/skills/{skillId}', 'patch', '200'), '#/components/schemas/Skill');
    assert.equal(answer('/api/svc/runs/{runId}', 'get', '200'), '#/components/schemas/RunWithDeliveries');
  });

  test('the headers a response declares as required are the ones the service sends', async () => {
    const org = await svc.createOrg();
    const calls = [
      { operationId: 'listTasks', status: 200, url: `/api/svc/tasks?organizationId=${org.organizationId}` },
      { operationId: 'getTask', status: 404, url: '/api/svc/tasks/00000000-0000-4000-8000-000000000000' },
      { operationId: 'listModels', status: 401, url: '/api/svc/models', key: 'sats_wrong' },
      { operationId: 'checkHealth', status: 200, url: '/healthz', key: undefined },
    ];
    const byId = new Map(operations(doc).map((o) => [o.op.operationId, o.op]));
    for (const call of calls) {
      const res = await svc.call({
        method: 'GET',
        url: call.url,
        key: 'key' in call ? call.key : org.apiKey,
      });
      assert.equal(res.status, call.status, `${call.operationId}: ${res.raw}`);
      const declared = headersOf(byId.get(call.operationId)?.responses[String(call.status)] ?? {});
      const required = declared.filter(
        (h) => doc.components.headers[h] && RESPONSE_HEADERS.find((r) => r.name === h)?.required,
      );
      assert.ok(required.length > 0);
      for (const h of required)
        assert.ok(res.headers[h.toLowerCase()], `${call.operationId} ${call.status} sends ${h}`);
    }
  });
});
