// Adversarial tests of the per-organization caps: an organization that creates without end
// (tasks it pauses, skills, sources, destinations, huge prompts and skill contents, connection
// tests and stdio servers at once) is held to the stated caps with a 403 (or a refusal) in the
// envelope, exactly under concurrency, and at its caps every list still answers in full.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { useTestService } from '../helpers/fixtures.ts';
import { everythingServerPath } from '../helpers/mcp-servers.ts';

const CAPS = {
  SVC_MAX_TASKS_PER_ORG: '6',
  SVC_MAX_SKILLS_PER_ORG: '4',
  SVC_MAX_SOURCES_PER_ORG: '3',
  SVC_MAX_DESTINATIONS_PER_ORG: '25',
  SVC_MAX_SKILL_CONTENT_MB_PER_ORG: '1',
  SVC_MAX_TASK_PROMPT_MB_PER_ORG: '1',
  SVC_MAX_SOURCE_TESTS_PER_ORG: '1',
  SVC_MAX_STDIO_PROCESSES_PER_ORG: '1',
};

/** 100,000 characters (the longest prompt or skill content) of 4 UTF-8 bytes each: 400,000 bytes. */
const WIDE = '😀'.repeat(100_000);

function assertCapped(res: { status: number; body: any }, fragment: RegExp): void {
  assert.equal(res.status, 403, JSON.stringify(res.body));
  assert.equal(res.body.error.code, 'plan_limit_exceeded');
  assert.match(res.body.error.message, fragment);
}

describe('per-organization caps', () => {
  const fx = useTestService({
    orgs: ['paid', 'paid', 'paid', 'paid', 'paid', 'paid'],
    env: { ...CAPS, SVC_ALLOW_PRIVATE_URLS: 'true', SVC_STDIO_COMMANDS: 'node' },
    rateLimitPerMinute: 100_000,
  });
  const call = (
    org: { apiKey: string },
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
  ) => fx.svc.call({ method, url, key: org.apiKey, ...(body !== undefined && { body }) });
  const orgAt = (i: number) => {
    const org = fx.orgs[i];
    assert.ok(org);
    return org;
  };
  const q = (org: { organizationId: string }) => `organizationId=${org.organizationId}`;

  test('paused tasks count toward the task cap, which holds exactly under concurrent creates', async () => {
    const org = orgAt(0);
    for (let i = 0; i < 3; i++) {
      const created = await call(org, 'POST', '/api/svc/tasks', {
        organizationId: org.organizationId,
        name: `t${i}`,
        prompt: 'p',
      });
      assert.equal(created.status, 201);
      const paused = await call(org, 'PATCH', `/api/svc/tasks/${created.body.id}?${q(org)}`, {
        status: 'paused',
      });
      assert.equal(paused.status, 200);
    }
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        call(org, 'POST', '/api/svc/tasks', {
          organizationId: org.organizationId,
          name: `c${i}`,
          prompt: 'p',
        }),
      ),
    );
    assert.equal(answers.filter((a) => a.status === 201).length, 3);
    for (const refused of answers.filter((a) => a.status !== 201)) assertCapped(refused, /at most 6 tasks/);
    const list = await call(org, 'GET', `/api/svc/tasks?${q(org)}`);
    assert.equal(list.body.length, 6);
  });

  test('the prompts of an organization are capped in bytes, on create and on a PATCH that grows one', async () => {
    const org = orgAt(1);
    const create = (prompt: string) =>
      call(org, 'POST', '/api/svc/tasks', { organizationId: org.organizationId, name: 'big', prompt });
    const small = await create('p');
    assert.equal(small.status, 201);
    assert.equal((await create(WIDE)).status, 201);
    assert.equal((await create(WIDE)).status, 201);
    assertCapped(await create(WIDE), /prompts .* at most 1 MB/);
    const grown = await call(org, 'PATCH', `/api/svc/tasks/${small.body.id}?${q(org)}`, { prompt: WIDE });
    assertCapped(grown, /prompts .* at most 1 MB/);
    const kept = await call(org, 'GET', `/api/svc/tasks/${small.body.id}`);
    assert.equal(kept.body.prompt, 'p');
  });

  test('destinations are capped over all the tasks of an organization, and a deleted task gives its back', async () => {
    const org = orgAt(2);
    const destinations = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ type: 'email', value: `d${i}@example.com` }));
    const create = (n: number) =>
      call(org, 'POST', '/api/svc/tasks', {
        organizationId: org.organizationId,
        name: 'with destinations',
        prompt: 'p',
        destinations: destinations(n),
      });
    const full = await create(20);
    assert.equal(full.status, 201);
    const five = await create(5);
    assert.equal(five.status, 201);
    assertCapped(await create(1), /at most 25 destinations/);
    const added = await call(org, 'POST', `/api/svc/tasks/${five.body.id}/destinations?${q(org)}`, {
      type: 'email',
      value: 'one-more@example.com',
    });
    assertCapped(added, /at most 25 destinations/);
    assert.equal((await call(org, 'DELETE', `/api/svc/tasks/${full.body.id}?${q(org)}`)).status, 204);
    const again = await create(20);
    assert.equal(again.status, 201);
    // Replacing a task's destinations and deleting one keep the totals true.
    const replaced = await call(org, 'PATCH', `/api/svc/tasks/${five.body.id}?${q(org)}`, {
      destinations: destinations(2),
      prompt: 'longer prompt',
    });
    assert.equal(replaced.status, 200);
    const gone = again.body.destinations[0].id;
    assert.equal(
      (await call(org, 'DELETE', `/api/svc/tasks/${again.body.id}/destinations/${gone}?${q(org)}`)).status,
      204,
    );
    const [kept] = await fx.db.query<Record<string, number>>(
      `SELECT o.total_tasks, o.task_prompt_bytes, o.total_destinations,
              (SELECT count(*)::int FROM tasks t WHERE t.organization_id = o.id) AS tasks,
              (SELECT sum(octet_length(t.prompt))::bigint FROM tasks t WHERE t.organization_id = o.id) AS prompt_bytes,
              (SELECT count(*)::int FROM task_destinations d JOIN tasks t ON t.id = d.task_id
                WHERE t.organization_id = o.id) AS destinations
         FROM organizations o WHERE o.id = $1`,
      [org.organizationId],
    );
    assert.deepEqual(
      [kept?.total_tasks, kept?.task_prompt_bytes, kept?.total_destinations],
      [kept?.tasks, kept?.prompt_bytes, kept?.destinations],
    );
    assert.equal(kept?.total_destinations, 21);
  });

  test('skills are capped in number under concurrent creates, and their content in bytes', async () => {
    const org = orgAt(3);
    const create = (content: string, i: number) =>
      call(org, 'POST', '/api/svc/skills', { organizationId: org.organizationId, name: `s${i}`, content });
    const first = await create('a', 0);
    assert.equal(first.status, 201);
    assert.equal((await create(WIDE, 1)).status, 201);
    assert.equal((await create(WIDE, 2)).status, 201);
    assertCapped(await create(WIDE, 3), /content .* at most 1 MB/);
    const grown = await call(org, 'PATCH', `/api/svc/skills/${first.body.id}?${q(org)}`, { content: WIDE });
    assertCapped(grown, /content .* at most 1 MB/);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => create('small', 10 + i)));
    assert.equal(answers.filter((a) => a.status === 201).length, 1);
    for (const refused of answers.filter((a) => a.status !== 201)) assertCapped(refused, /at most 4 skills/);
  });

  test('sources are capped in number under concurrent creates', async () => {
    const org = orgAt(4);
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call(org, 'POST', '/api/svc/sources', {
          organizationId: org.organizationId,
          name: `src${i}`,
          type: 'local',
          config: {},
        }),
      ),
    );
    assert.equal(answers.filter((a) => a.status === 201).length, 3);
    for (const refused of answers.filter((a) => a.status !== 201)) assertCapped(refused, /at most 3 sources/);
  });

  describe('connections at once', () => {
    let slow: Server;
    let slowUrl: string;
    before(async () => {
      // Answers every request after a second and a half, so a test of it stays in flight.
      slow = createServer((_req, res) => {
        setTimeout(() => res.writeHead(404).end(), 1500);
      });
      await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
      slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/mcp`;
    });
    after(() => new Promise<void>((r) => slow.close(() => r())));

    test('a second connection test of an organization while one runs is refused with 429', async () => {
      const org = orgAt(5);
      const source = await call(org, 'POST', '/api/svc/sources', {
        organizationId: org.organizationId,
        name: 'slow',
        type: 'mcp',
        config: { transport: 'http', url: slowUrl },
      });
      assert.equal(source.status, 201);
      const testIt = () => call(org, 'POST', `/api/svc/sources/${source.body.id}/test?${q(org)}`);
      const [one, two] = await Promise.all([testIt(), testIt()]);
      const statuses = [one.status, two.status].sort();
      assert.deepEqual(statuses, [200, 429], JSON.stringify([one.body, two.body]));
      const refused = one.status === 429 ? one : two;
      assert.equal(refused.body.error.code, 'rate_limited');
      assert.ok(refused.headers['retry-after']);
      // Once the first has finished, the slot is free again.
      assert.equal((await testIt()).status, 200);
    });
  });
});

describe('stdio servers at once', () => {
  const fx = useTestService({
    orgs: ['paid', 'paid', 'paid'],
    env: {
      SVC_MAX_STDIO_PROCESSES_PER_ORG: '1',
      SVC_MAX_STDIO_PROCESSES: '2',
      SVC_MAX_SOURCE_TESTS_PER_ORG: '2',
      SVC_STDIO_COMMANDS: 'node',
    },
  });
  type Org = { organizationId: string; apiKey: string };
  const make = async (org: Org, name: string) => {
    const res = await fx.svc.call({
      method: 'POST',
      url: '/api/svc/sources',
      key: org.apiKey,
      body: {
        organizationId: org.organizationId,
        name,
        type: 'mcp',
        config: { transport: 'stdio', command: 'node', args: [everythingServerPath, 'stdio'] },
      },
    });
    assert.equal(res.status, 201, res.raw);
    return res.body.id as string;
  };
  const testSource = async (org: Org, id: string) => {
    const res = await fx.svc.call({
      method: 'POST',
      url: `/api/svc/sources/${id}/test?organizationId=${org.organizationId}`,
      key: org.apiKey,
    });
    assert.equal(res.status, 200, res.raw);
    return res.body as { success: boolean; message: string };
  };

  test('a stdio server beyond the organization’s cap is refused while one runs', async () => {
    const org = fx.org;
    // Two sources, so that the cap on stdio servers is what refuses.
    const ids = [await make(org, 'stdio a'), await make(org, 'stdio b')];
    const bodies = await Promise.all(ids.map((id) => testSource(org, id)));
    assert.equal(bodies.filter((b) => b.success).length, 1, JSON.stringify(bodies));
    assert.match(bodies.find((b) => !b.success)?.message ?? '', /stdio servers, the most allowed at once/);
    // The server of the first test was stopped: its slot is free again.
    assert.equal((await testSource(org, ids[1] ?? '')).success, true);
  });

  test('stdio servers beyond the process’s cap are refused whichever organizations start them', async () => {
    const orgs = fx.orgs.slice(0, 3);
    const ids = await Promise.all(orgs.map((org, i) => make(org, `stdio ${i}`)));
    const bodies = await Promise.all(orgs.map((org, i) => testSource(org, ids[i] ?? '')));
    assert.equal(bodies.filter((b) => b.success).length, 2, JSON.stringify(bodies));
    assert.match(bodies.find((b) => !b.success)?.message ?? '', /the service runs as many stdio servers/);
  });
});

describe('lists at the caps', () => {
  const LIST_CAPS = {
    SVC_MAX_TASKS_PER_ORG: '4',
    SVC_MAX_SKILLS_PER_ORG: '50',
    SVC_MAX_SOURCES_PER_ORG: '50',
    SVC_MAX_DESTINATIONS_PER_ORG: '80',
    SVC_MAX_SKILL_CONTENT_MB_PER_ORG: '1',
    SVC_MAX_TASK_PROMPT_MB_PER_ORG: '1',
  };
  const fx = useTestService({ orgs: ['paid'], env: LIST_CAPS, rateLimitPerMinute: 100_000 });
  /** A control character: one byte stored, six (`\u0001`) in a JSON answer, the most any character costs. */
  const C = '\u0001';
  const KB = 1024;
  const MB = 1024 * KB;

  test('an organization at every cap, with large rows, still lists all of them within the stated sizes', async (t) => {
    const org = fx.org;
    const q = `organizationId=${org.organizationId}`;
    const call = (method: 'GET' | 'POST', url: string, body?: unknown) =>
      fx.svc.call({ method, url, key: org.apiKey, ...(body !== undefined && { body }) });
    const skillIds: string[] = [];
    for (let i = 0; i < 50; i++) {
      const res = await call('POST', '/api/svc/skills', {
        organizationId: org.organizationId,
        name: `${i}${C.repeat(250)}`,
        content: C.repeat(20_000),
        category: C.repeat(100),
        description: C.repeat(2000),
        frontmatter: {
          author: C.repeat(200),
          requiredSources: Array.from({ length: 50 }, (_, j) => `s${j}-${'a'.repeat(90)}`),
          tags: Array.from({ length: 20 }, () => C.repeat(50)),
        },
      });
      assert.equal(res.status, 201, res.raw.slice(0, 300));
      skillIds.push(res.body.id);
    }
    const sourceIds: string[] = [];
    for (let i = 0; i < 50; i++) {
      const res = await call('POST', '/api/svc/sources', {
        organizationId: org.organizationId,
        name: `${i}${C.repeat(250)}`,
        type: 'api',
        description: C.repeat(2000),
        config: {
          baseUrl: 'https://api.example.com',
          args: Array.from({ length: 30 }, () => C.repeat(4096)),
        },
      });
      assert.equal(res.status, 201, res.raw.slice(0, 300));
      sourceIds.push(res.body.id);
    }
    for (let i = 0; i < 4; i++) {
      const res = await call('POST', '/api/svc/tasks', {
        organizationId: org.organizationId,
        name: `${i}${C.repeat(250)}`,
        prompt: C.repeat(100_000),
        skillIds,
        sourceIds,
        destinations: Array.from({ length: 20 }, () => ({
          type: 'webhook',
          value: `https://hooks.example.com/${C.repeat(2000)}`,
          label: C.repeat(255),
        })),
      });
      assert.equal(res.status, 201, res.raw.slice(0, 300));
    }
    // At every cap: one more of each is refused.
    const more = await call('POST', '/api/svc/tasks', {
      organizationId: org.organizationId,
      name: 'x',
      prompt: 'p',
    });
    assert.equal(more.status, 403);
    const moreSkill = await call('POST', '/api/svc/skills', {
      organizationId: org.organizationId,
      name: 'x',
      content: 'c',
    });
    assert.equal(moreSkill.status, 403);
    const moreSource = await call('POST', '/api/svc/sources', {
      organizationId: org.organizationId,
      name: 'x',
      type: 'local',
      config: {},
    });
    assert.equal(moreSource.status, 403);

    // The sizes docs/api.md states for each list, at these caps.
    const bounds = {
      tasks: 6 * 1 * MB + 4 * 16 * KB + 80 * 16 * KB,
      skills: 6 * 1 * MB + 50 * 64 * KB,
      sources: 50 * 2 * MB,
    };
    for (const [list, count] of [
      ['tasks', 4],
      ['skills', 50],
      ['sources', 50],
    ] as const) {
      const res = await call('GET', `/api/svc/${list}?${q}`);
      assert.equal(res.status, 200);
      assert.equal(res.body.length, count);
      const bytes = Buffer.byteLength(res.raw);
      t.diagnostic(`GET /${list}: ${count} rows, ${bytes} bytes (stated bound ${bounds[list]})`);
      assert.ok(bytes <= bounds[list], `GET /${list}: ${bytes} bytes, more than the stated ${bounds[list]}`);
    }
  });
});
