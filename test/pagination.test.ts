// Cursor pagination of every list: keyset pages in the list's order, the next page in a
// `Link: <...>; rel="next"` header, opaque sealed cursors. Rows are written with microsecond
// timestamps and ties, and rows are inserted and deleted between pages, so that a cursor that
// lost precision or compared only the time would skip or repeat rows here.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { assertValidation } from './helpers/assertions.ts';
import { addRun, insertTask, type Org, useTestService } from './helpers/fixtures.ts';
import type { TestService } from './helpers/service.ts';

/** The URL of a Link rel="next" header, or undefined. */
function nextLink(header: unknown): string | undefined {
  if (header === undefined) return undefined;
  const m = /^<([^>]+)>; rel="next"$/.exec(String(header));
  assert.ok(m, `a Link rel="next" header: ${String(header)}`);
  return m[1];
}

/** Every page of a list from `url` on, following Link; `between` runs after the first page. */
async function walk(
  svc: TestService,
  key: string,
  url: string,
  between: () => Promise<void> = async () => {},
): Promise<{ pages: unknown[][]; links: string[] }> {
  const pages: unknown[][] = [];
  const links: string[] = [];
  let next: string | undefined = url;
  while (next) {
    const res = await svc.call({ method: 'GET', url: next, key });
    assert.equal(res.status, 200, res.raw);
    assert.ok(Array.isArray(res.body), 'the body stays an array');
    pages.push(res.body);
    const link = nextLink(res.headers.link);
    if (link) {
      links.push(link);
      const u = new URL(link);
      next = u.pathname + u.search;
    } else next = undefined;
    if (pages.length === 1) await between();
    assert.ok(pages.length < 100, 'the walk ends');
  }
  return { pages, links };
}

/** A microsecond timestamp `seconds` after a base, with a sub-millisecond part. */
const at = (seconds: number, micros = 0) =>
  new Date(Date.UTC(2030, 0, 1) + seconds * 1000)
    .toISOString()
    .replace('Z', `${String(micros).padStart(3, '0')}Z`);

interface ListCase {
  name: string;
  url: (org: Org, scope: string) => string;
  /** A parent task (for a task's lists) made once per case. */
  needsTask: boolean;
  /** Writes one row of the list at `ts` (microseconds), returning the id the API shows. */
  add: (org: Org, scope: string, ts: string) => Promise<string>;
  remove: (id: string, scope: string) => Promise<void>;
  idOf: (item: any) => string;
  /** Whether two rows may share a timestamp (the id then breaks the tie). */
  ties: boolean;
}

describe('cursor pagination of every list', () => {
  const fx = useTestService({ orgs: ['paid', 'paid'], rateLimitPerMinute: 100_000 });

  const setCreated = (table: string) => async (id: string, ts: string) => {
    await fx.db.query(`UPDATE ${table} SET created_at = $2::timestamptz WHERE id = $1`, [id, ts]);
  };
  const deleteFrom = (table: string) => async (id: string) => {
    await fx.db.query(`DELETE FROM ${table} WHERE id = $1`, [id]);
  };
  const viaApi = async (org: Org, resource: string, body: Record<string, unknown>) => {
    const res = await fx.svc.call({
      method: 'POST',
      url: `/api/svc/${resource}`,
      key: org.apiKey,
      body: { organizationId: org.organizationId, ...body },
    });
    assert.equal(res.status, 201, res.raw);
    return res.body.id as string;
  };

  /** Rows of the two run lists: a run of the case's task, created at `ts`. */
  const runRows: Omit<ListCase, 'name' | 'url'> = {
    needsTask: true,
    add: async (org, scope, ts) => {
      const id = await addRun(fx.db, org.organizationId, scope);
      await setCreated('runs')(id, ts);
      return id;
    },
    remove: deleteFrom('runs'),
    idOf: (r) => r.id,
    ties: true,
  };

  const cases: ListCase[] = [
    {
      name: 'tasks',
      url: (org) => `/api/svc/tasks?organizationId=${org.organizationId}`,
      needsTask: false,
      add: async (org, _scope, ts) => {
        const id = await insertTask(fx.db, org.organizationId);
        await setCreated('tasks')(id, ts);
        return id;
      },
      remove: deleteFrom('tasks'),
      idOf: (t) => t.id,
      ties: true,
    },
    {
      name: 'skills',
      url: (org) => `/api/svc/skills?organizationId=${org.organizationId}`,
      needsTask: false,
      add: async (org, _scope, ts) => {
        const id = await viaApi(org, 'skills', { name: `Skill ${randomUUID()}`, content: 'Be brief.' });
        await setCreated('skills')(id, ts);
        return id;
      },
      remove: deleteFrom('skills'),
      idOf: (s) => s.id,
      ties: true,
    },
    {
      name: 'sources',
      url: (org) => `/api/svc/sources?organizationId=${org.organizationId}`,
      needsTask: false,
      add: async (org, _scope, ts) => {
        const id = await viaApi(org, 'sources', {
          name: `Source ${randomUUID()}`,
          type: 'local',
          config: {},
        });
        await setCreated('sources')(id, ts);
        return id;
      },
      remove: deleteFrom('sources'),
      idOf: (s) => s.id,
      ties: true,
    },
    {
      name: "the organization's runs",
      url: (org) => `/api/svc/runs?organizationId=${org.organizationId}`,
      ...runRows,
    },
    {
      name: "a task's runs",
      url: (_org, scope) => `/api/svc/tasks/${scope}/runs`,
      ...runRows,
    },
    {
      name: "a task's slot record",
      url: (_org, scope) => `/api/svc/tasks/${scope}/slots`,
      needsTask: true,
      add: async (_org, scope, ts) => {
        await fx.db.query(
          `INSERT INTO task_slots (task_id, slot_at, outcome, recorded_at) VALUES ($1, $2::timestamptz, 'missed', now())`,
          [scope, ts],
        );
        return new Date(ts).toISOString();
      },
      remove: async (id, scope) => {
        await fx.db.query('DELETE FROM task_slots WHERE task_id = $1 AND slot_at = $2::timestamptz', [
          scope,
          id,
        ]);
      },
      idOf: (s) => s.slotAt,
      ties: false,
    },
  ];

  for (const c of cases) {
    test(`${c.name}: every row is reached once, in order, while rows are inserted and deleted between pages`, async () => {
      const org = fx.org;
      const scope = c.needsTask ? await insertTask(fx.db, org.organizationId) : '';
      // Fresh rows for this case: the organization's other lists keep theirs, so a list shared
      // with an earlier case (the organization's runs) is compared as a whole below.
      const before = await walk(fx.svc, org.apiKey, c.url(org, scope));
      const existing = before.pages.flat().map(c.idOf);
      // Timestamps one microsecond apart within a millisecond, and (where allowed) equal ones.
      // (Slot records show their instant to the millisecond: theirs are whole seconds apart.)
      const stamps = c.ties
        ? [
            at(10, 1),
            at(10, 2),
            at(10, 999),
            at(11, 500),
            at(12),
            at(13, 7),
            at(14, 8),
            at(12),
            at(12),
            at(13, 7),
          ]
        : [at(10), at(11), at(12), at(13), at(14), at(15), at(16)];
      const seeded: { id: string; ts: string }[] = [];
      for (const ts of stamps) seeded.push({ id: await c.add(org, scope, ts), ts });
      const newest = (rows: { id: string; ts: string }[]) =>
        [...rows]
          .sort((a, b) => (a.ts === b.ts ? (a.id < b.id ? 1 : -1) : a.ts < b.ts ? 1 : -1))
          .map((r) => r.id);
      const order = newest(seeded);
      if (!c.ties) assert.equal(new Set(order).size, order.length);

      let inserted: { older: string; newer: string } | undefined;
      const removed = order[order.length - 3] as string;
      const { pages, links } = await walk(
        fx.svc,
        org.apiKey,
        `${c.url(org, scope)}${c.url(org, scope).includes('?') ? '&' : '?'}limit=2`,
        async () => {
          // After the first page: a row newer than the cursor (not this walk's), one older than
          // every row (this walk's last), and a row not yet reached is deleted.
          inserted = {
            newer: await c.add(org, scope, at(3600)),
            older: await c.add(org, scope, at(-3600, 5)),
          };
          await c.remove(removed, scope);
        },
      );
      const ids = pages.flat().map(c.idOf);
      assert.equal(new Set(ids).size, ids.length, 'no row twice');
      assert.ok(
        pages.every((p) => p.length <= 2),
        'pages of at most limit rows',
      );
      const fresh = ids.filter((id) => !existing.includes(id));
      assert.deepEqual(
        fresh,
        [...order.filter((id) => id !== removed), inserted?.older],
        'every row that existed throughout, in order; the older row inserted mid-walk at the end; not the newer one',
      );
      // Every Link is absolute, keeps the other parameters and names the next cursor.
      for (const link of links) {
        const u = new URL(link);
        assert.equal(u.origin, 'http://localhost');
        assert.equal(u.searchParams.get('limit'), '2');
        assert.ok(u.searchParams.get('cursor'));
        if (c.url(org, scope).includes('organizationId')) {
          assert.equal(u.searchParams.get('organizationId'), org.organizationId);
        }
      }
      assert.equal(links.length, pages.length - 1, 'no Link on the last page');
    });
  }

  test('a cursor that is malformed, altered, of another list, task or organization is a 400 at /query/cursor', async () => {
    const { org, other } = fx;
    const taskA = await insertTask(fx.db, org.organizationId);
    const taskB = await insertTask(fx.db, org.organizationId);
    for (const task of [taskA, taskB]) {
      for (let i = 0; i < 3; i++) await addRun(fx.db, org.organizationId, task);
    }
    const first = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/tasks/${taskA}/runs?limit=1`,
      key: org.apiKey,
    });
    const cursor = new URL(nextLink(first.headers.link) as string).searchParams.get('cursor') as string;
    const ok = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/tasks/${taskA}/runs?limit=1&cursor=${encodeURIComponent(cursor)}`,
      key: org.apiKey,
    });
    assert.equal(ok.status, 200, 'the cursor itself works');

    // One character before the last changed (the last may carry only padding bits): to B if it was
    // A, else to A, so the cursor always differs.
    const altered = cursor.slice(0, -2) + (cursor.at(-2) === 'A' ? 'B' : 'A') + cursor.slice(-1);
    const refused: [string, string][] = [
      ['not a cursor', `/api/svc/tasks/${taskA}/runs?cursor=abc`],
      ['altered', `/api/svc/tasks/${taskA}/runs?cursor=${encodeURIComponent(altered)}`],
      ['of another task', `/api/svc/tasks/${taskB}/runs?cursor=${encodeURIComponent(cursor)}`],
      [
        'of another list',
        `/api/svc/runs?organizationId=${org.organizationId}&cursor=${encodeURIComponent(cursor)}`,
      ],
      ['empty', `/api/svc/tasks?organizationId=${org.organizationId}&cursor=`],
      ['too long', `/api/svc/skills?organizationId=${org.organizationId}&cursor=${'v1.'.padEnd(600, 'A')}`],
    ];
    for (const [what, url] of refused) {
      const res = await fx.svc.call({ method: 'GET', url, key: org.apiKey });
      assert.equal(res.status, 400, `${what}: ${res.raw}`);
      assertValidation(res, '/query/cursor');
    }
    // Another organization's cursor, for a list it may read: its own tasks list.
    const mine = await walkFirstCursor(
      fx.svc,
      org,
      `/api/svc/tasks?organizationId=${org.organizationId}&limit=1`,
    );
    const theirs = await fx.svc.call({
      method: 'GET',
      url: `/api/svc/tasks?organizationId=${other.organizationId}&cursor=${encodeURIComponent(mine)}`,
      key: other.apiKey,
    });
    assertValidation(theirs, '/query/cursor');
  });

  test('limit is 1 to 100 on every list; tasks, skills and sources default to 100, the run lists to 20', async () => {
    const org = fx.other;
    const task = await insertTask(fx.db, org.organizationId);
    const lists = [
      `/api/svc/tasks?organizationId=${org.organizationId}`,
      `/api/svc/skills?organizationId=${org.organizationId}`,
      `/api/svc/sources?organizationId=${org.organizationId}`,
      `/api/svc/runs?organizationId=${org.organizationId}`,
      `/api/svc/tasks/${task}/runs?`,
      `/api/svc/tasks/${task}/slots?`,
    ];
    for (const url of lists) {
      const sep = url.endsWith('?') ? '' : '&';
      for (const limit of ['0', '101', 'ten']) {
        assertValidation(
          await fx.svc.call({ method: 'GET', url: `${url}${sep}limit=${limit}`, key: org.apiKey }),
          '/query/limit',
        );
      }
    }
    // 101 tasks: a page of 100, then one more; 25 runs: 20, then 5.
    for (let i = 0; i < 100; i++) await insertTask(fx.db, org.organizationId);
    for (let i = 0; i < 25; i++) await addRun(fx.db, org.organizationId, task);
    const tasks = await walk(fx.svc, org.apiKey, lists[0] as string);
    assert.deepEqual(
      tasks.pages.map((p) => p.length),
      [100, 1],
    );
    const runs = await walk(fx.svc, org.apiKey, lists[3] as string);
    assert.deepEqual(
      runs.pages.map((p) => p.length),
      [20, 5],
    );
    const exact = await fx.svc.call({ method: 'GET', url: `${lists[3]}&limit=25`, key: org.apiKey });
    assert.equal(exact.body.length, 25);
    assert.equal(exact.headers.link, undefined, 'a page that ends the list has no Link');
  });
});

async function walkFirstCursor(svc: TestService, org: Org, url: string): Promise<string> {
  const res = await svc.call({ method: 'GET', url, key: org.apiKey });
  return new URL(nextLink(res.headers.link) as string).searchParams.get('cursor') as string;
}
