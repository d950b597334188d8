import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { after, before, describe, type TestContext, test } from 'node:test';
import { Client, type Dispatcher, Pool } from 'undici';
import { generateApiKey } from '../../src/domain/api-key-format.ts';
import { createPostgresDatabase, TEST_DATABASE_URL } from '../helpers/db.ts';
import { type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';

/**
 * Load isolation over real HTTP connections to the real entry point (one api process): an
 * organization, or an unauthenticated client address, hammered at ten times its rate limit is
 * held to exactly that limit, with 429s in the error envelope, while other organizations keep
 * being served. Latency under the storm is measured and reported as a diagnostic only.
 *
 * Rate-limit windows are fixed minutes and this process runs on the system clock, so a storm
 * may straddle a window boundary. Every answer names its window in `X-RateLimit-Reset`, so the
 * counts are checked window by window: a window's successes are exactly
 * min(limit, requests counted in it).
 */

const FREE_LIMIT = 60;
const STORM = 10 * FREE_LIMIT;
const IN_FLIGHT = 32;
const ENTERPRISE_LIMIT = 100_000;
/** Organizations measured beside the storm, each one request at a time on its own connection. */
const BYSTANDERS = 4;
const QUIET_PER_BYSTANDER = 50;
/** Requests of a free organization beside a storm: within its own limit, whatever the storm's length. */
const BESIDE_FREE_MAX = 40;

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** From sending the request to reading the whole answer, in milliseconds. */
  ms: number;
}

async function send(
  d: Dispatcher,
  method: 'GET' | 'POST' | 'PATCH',
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<Answer> {
  const sentAt = performance.now();
  const res = await d.request({
    method,
    path,
    headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.body.text();
  const flat: Record<string, string> = {};
  for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) flat[k] = String(v);
  return { status: res.statusCode, headers: flat, body: text, ms: performance.now() - sentAt };
}

/** `total` calls, at most `concurrency` at a time; answers in call order. */
/**
 * `total` calls, `concurrency` at a time; then more while `keepGoing()` holds, up to `cap` in all
 * (so that the other clients surely get requests in while it lasts, however fast it is served).
 */
async function flood<T>(
  total: number,
  concurrency: number,
  one: (i: number) => Promise<T>,
  keepGoing: () => boolean = () => false,
  cap = total,
): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total || (next < cap && keepGoing())) {
        const i = next++;
        out[i] = await one(i);
      }
    }),
  );
  return out;
}

/** Sequential calls while `busy()` holds: at least `min` of them, at most `max`. */
async function whileBusy(
  busy: () => boolean,
  min: number,
  max: number,
  one: () => Promise<Answer>,
  onOverlap: () => void = () => undefined,
) {
  const out: { answer: Answer; overlapped: boolean }[] = [];
  while ((busy() || out.length < min) && out.length < max) {
    const wasBusy = busy();
    const answer = await one();
    const overlapped = wasBusy && busy();
    if (overlapped) onOverlap();
    out.push({ answer, overlapped });
  }
  return out;
}

function percentiles(samples: number[]): string {
  const sorted = [...samples].sort((x, y) => x - y);
  const at = (p: number) =>
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? NaN;
  const f = (n: number) => n.toFixed(1);
  return `n=${sorted.length} p50=${f(at(0.5))}ms p95=${f(at(0.95))}ms p99=${f(at(0.99))}ms max=${f(at(1))}ms`;
}

const windowOf = (a: Answer) => a.headers['x-ratelimit-reset'] ?? 'none';

function byWindow(answers: Answer[]): Map<string, Answer[]> {
  const windows = new Map<string, Answer[]>();
  for (const a of answers) windows.set(windowOf(a), [...(windows.get(windowOf(a)) ?? []), a]);
  return windows;
}

/** Every answer carries the three rate-limit headers, with integer values and the given limit. */
function assertRateHeaders(a: Answer, limit: number): void {
  assert.equal(a.headers['x-ratelimit-limit'], String(limit), JSON.stringify(a.headers));
  assert.match(a.headers['x-ratelimit-remaining'] ?? '', /^\d+$/);
  assert.match(a.headers['x-ratelimit-reset'] ?? '', /^\d+$/);
}

/** A 429 in the envelope, with a Retry-After in delta seconds that ends the answer's window. */
function assertRateLimited(a: Answer, limit: number): void {
  assert.equal(a.status, 429, a.body);
  assert.match(a.headers['content-type'] ?? '', /^application\/json/);
  const body = JSON.parse(a.body);
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(body.error.code, 'rate_limited');
  assert.ok(typeof body.error.message === 'string' && body.error.message.length > 0);
  assertRateHeaders(a, limit);
  assert.equal(a.headers['x-ratelimit-remaining'], '0');
  const retryAfter = Number(a.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  // A client that waits Retry-After from the answer's Date (the server's clock, whole seconds,
  // which may lag by a second) comes back once the window has ended, not before.
  const served = Math.floor(Date.parse(a.headers.date ?? '') / 1000);
  const reset = Number(a.headers['x-ratelimit-reset']);
  assert.ok(served + retryAfter >= reset - 2, `Date ${served} + Retry-After ${retryAfter} vs Reset ${reset}`);
  assert.ok(reset - served <= 62, `Reset ${reset} is within a minute of Date ${served}`);
}

/**
 * The answers of one caller that no one else shares a budget with, sent one at a time: each is
 * a 200 whose Remaining counts exactly that caller's own requests in its window.
 */
function assertServedAlone(answers: Answer[], limit: number, who: string): void {
  for (const [window, inWindow] of byWindow(answers)) {
    inWindow.forEach((a, k) => {
      assert.equal(a.status, 200, `${who}: ${a.status} ${a.body}`);
      assertRateHeaders(a, limit);
      assert.equal(
        a.headers['x-ratelimit-remaining'],
        String(limit - (k + 1)),
        `${who}: request ${k + 1} of window ${window} counts only its own requests`,
      );
    });
  }
}

/** Whether this machine lets a client connect from `address` (Linux routes all of 127.0.0.0/8). */
function canBindFrom(serverUrl: string, address: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({
      host: '127.0.0.1',
      port: Number(new URL(serverUrl).port),
      localAddress: address,
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe('load isolation over HTTP', () => {
  let server: ServerProcess;
  let cleanup: () => Promise<void>;
  let admin: Client;
  const clients: Dispatcher[] = [];

  const dispatcher = <T extends Dispatcher>(d: T): T => {
    clients.push(d);
    return d;
  };

  async function createOrg(plan: 'free' | 'paid', rateLimitPerMinute?: number) {
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const made = await send(admin, 'POST', '/api/admin/organizations', auth, {
      name: `Load ${randomBytes(3).toString('hex')}`,
      plan,
    });
    assert.equal(made.status, 201, made.body);
    const org = JSON.parse(made.body) as { organizationId: string; apiKey: string };
    if (rateLimitPerMinute !== undefined) {
      const path = `/api/admin/organizations/${org.organizationId}`;
      const patched = await send(admin, 'PATCH', path, auth, { rateLimitPerMinute });
      assert.equal(patched.status, 200, patched.body);
    }
    return {
      ...org,
      auth: { authorization: `Bearer ${org.apiKey}` },
      statusPath: `/api/svc/billing/status?organizationId=${org.organizationId}`,
    };
  }

  before(async () => {
    const env: Record<string, string> = {
      SVC_ROLE: 'api',
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_CREATE_DEMO_ORG: 'false',
      SVC_SECRET_KEY: randomBytes(32).toString('base64'),
    };
    if (TEST_DATABASE_URL) {
      const db = await createPostgresDatabase();
      env.DATABASE_URL = db.url;
      cleanup = db.drop;
    } else {
      env.SVC_DATA_DIR = 'memory://';
      cleanup = async () => undefined;
    }
    server = await startServerProcess(env);
    admin = dispatcher(new Client(server.url));
  });

  after(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    if (server) {
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0, server.stderr());
    }
    await cleanup?.();
  });

  test('a free organization hammered at 10× its limit gets exactly its limit; other organizations are served throughout', async (t: TestContext) => {
    const hammered = await createOrg('free');
    // Enterprise organizations (operator override) measure latency, each on its own connection,
    // one request at a time; a free one shows that an organization on the same plan keeps its
    // whole budget.
    const bystanders = await Promise.all(
      Array.from({ length: BYSTANDERS }, async () => {
        const org = await createOrg('paid', ENTERPRISE_LIMIT);
        const client = dispatcher(new Client(server.url));
        return { org, call: () => send(client, 'GET', org.statusPath, org.auth), answers: [] as Answer[] };
      }),
    );
    const neighbour = await createOrg('free');
    const neighbourClient = dispatcher(new Client(server.url));
    const stormPool = dispatcher(new Pool(server.url, { connections: IN_FLIGHT }));

    // Warm-up, then a quiet baseline of the bystanders alone.
    const quiet: Answer[] = [];
    await Promise.all(
      bystanders.map(async (b) => {
        for (let i = 0; i < 10 + QUIET_PER_BYSTANDER; i++) {
          const answer = await b.call();
          b.answers.push(answer);
          if (i >= 10) quiet.push(answer);
        }
      }),
    );

    // The storm: 600 requests of the free organization, 32 in flight, over several routes.
    const routes = [
      hammered.statusPath,
      `/api/svc/tasks?organizationId=${hammered.organizationId}`,
      `/api/svc/stats?organizationId=${hammered.organizationId}`,
      '/api/svc/models',
    ];
    let storming = true;
    // The storm goes on past its 600 requests until the neighbour and every bystander have had
    // an answer that started and ended inside it (at most 4× as many requests).
    let neighbourInside = false;
    const bystandersInside = new Set<number>();
    const stormStart = performance.now();
    const stormDone = flood(
      STORM,
      IN_FLIGHT,
      (i) => send(stormPool, 'GET', routes[i % routes.length] ?? '', hammered.auth),
      () => !neighbourInside || bystandersInside.size < bystanders.length,
      4 * STORM,
    ).finally(() => {
      storming = false;
    });
    const [storm, neighbourDuring, ...during] = await Promise.all([
      stormDone,
      whileBusy(
        () => storming,
        10,
        BESIDE_FREE_MAX,
        () => send(neighbourClient, 'GET', neighbour.statusPath, neighbour.auth),
        () => {
          neighbourInside = true;
        },
      ),
      ...bystanders.map((b, i) =>
        whileBusy(
          () => storming,
          5,
          10_000,
          b.call,
          () => bystandersInside.add(i),
        ),
      ),
    ]);
    const stormMs = performance.now() - stormStart;

    // The hammered organization: 200s and 429s only, exactly `limit` successes per window.
    const unexpected = storm.filter((a) => a.status !== 200 && a.status !== 429);
    assert.deepEqual(
      unexpected.map((a) => `${a.status} ${a.body}`),
      [],
      'every answer is a success or a 429',
    );
    const windows = byWindow(storm);
    assert.ok(windows.size <= 2, `the storm spans at most two windows: ${[...windows.keys()]}`);
    const perWindow: string[] = [];
    for (const [window, answers] of windows) {
      const ok = answers.filter((a) => a.status === 200);
      for (const a of ok) {
        assertRateHeaders(a, FREE_LIMIT);
        assert.ok(Number(a.headers['x-ratelimit-remaining']) < FREE_LIMIT);
      }
      for (const a of answers.filter((x) => x.status === 429)) assertRateLimited(a, FREE_LIMIT);
      assert.equal(
        ok.length,
        Math.min(FREE_LIMIT, answers.length),
        `window ending ${window}: ${ok.length} successes of ${answers.length} requests`,
      );
      const distinct = new Set(ok.map((a) => a.headers['x-ratelimit-remaining'])).size;
      perWindow.push(
        `window ${window}: ${ok.length}/${answers.length} served, ${distinct} distinct Remaining`,
      );
    }
    assert.ok(
      storm.some((a) => a.status === 429),
      'the storm was limited',
    );

    // The other organizations: every request served, their own counters untouched by the storm.
    bystanders.forEach((b, i) => {
      const mine = [...b.answers, ...(during[i] ?? []).map((d) => d.answer)];
      assertServedAlone(mine, ENTERPRISE_LIMIT, `enterprise organization ${i + 1}`);
    });
    assertServedAlone(
      neighbourDuring.map((d) => d.answer),
      FREE_LIMIT,
      'the free organization beside the storm',
    );
    const overlapped = during
      .flat()
      .filter((d) => d.overlapped)
      .map((d) => d.answer);
    assert.ok(overlapped.length > 0, 'the bystanders were served while the storm was in flight');
    assert.ok(
      neighbourDuring.some((d) => d.overlapped),
      'the free neighbour was served while the storm was in flight',
    );

    t.diagnostic(`backend: ${TEST_DATABASE_URL ? 'postgres' : 'pglite'}, one api process`);
    t.diagnostic(
      `storm: ${storm.length} requests, ${IN_FLIGHT} in flight, ${stormMs.toFixed(0)} ms; ${perWindow.join('; ')}`,
    );
    t.diagnostic(`storm answers: ${percentiles(storm.map((a) => a.ms))}`);
    t.diagnostic(
      `other organizations (${BYSTANDERS} × 1 in flight), quiet:        ${percentiles(quiet.map((a) => a.ms))}`,
    );
    t.diagnostic(
      `other organizations (${BYSTANDERS} × 1 in flight), during storm: ${percentiles(overlapped.map((a) => a.ms))}`,
    );
    t.diagnostic(
      `free neighbour, during storm: ${neighbourDuring.filter((d) => d.overlapped).length} requests, all 200`,
    );
  });

  test('a 401 flood from one client address is limited per address and starves no organization', async (t: TestContext) => {
    const org = await createOrg('free');
    const floodPool = dispatcher(new Pool(server.url, { connections: IN_FLIGHT }));
    const orgClient = dispatcher(new Client(server.url));
    // Missing, malformed, foreign-scheme and well-formed but unknown keys; half of them claim
    // another client address in X-Forwarded-For, which a service without a trusted proxy ignores.
    const unauthenticated = (i: number): Record<string, string> => {
      const headers: Record<string, string> = {};
      if (i % 2) headers['x-forwarded-for'] = `198.51.100.${i % 250}`;
      const authorization = [
        undefined,
        'Bearer not-a-key',
        `Basic ${btoa('a:b')}`,
        `Bearer ${generateApiKey()}`,
      ][i % 4];
      if (authorization) headers.authorization = authorization;
      return headers;
    };
    let flooding = true;
    // Past its 600 requests until the organization has had an answer inside it (at most 4×).
    let servedInside = false;
    const floodDone = flood(
      STORM,
      IN_FLIGHT,
      (i) => send(floodPool, 'GET', org.statusPath, unauthenticated(i)),
      () => !servedInside,
      4 * STORM,
    ).finally(() => {
      flooding = false;
    });
    const [answers, served] = await Promise.all([
      floodDone,
      // The organization calls from the very same address (loopback) with its key.
      whileBusy(
        () => flooding,
        10,
        BESIDE_FREE_MAX,
        () => send(orgClient, 'GET', org.statusPath, org.auth),
        () => {
          servedInside = true;
        },
      ),
    ]);

    const perWindow: string[] = [];
    for (const [window, inWindow] of byWindow(answers)) {
      const refused = inWindow.filter((a) => a.status === 401);
      for (const a of refused) {
        assert.match(a.headers['content-type'] ?? '', /^application\/json/);
        assert.equal(JSON.parse(a.body).error.code, 'unauthorized');
        assertRateHeaders(a, FREE_LIMIT);
      }
      const limited = inWindow.filter((a) => a.status === 429);
      for (const a of limited) assertRateLimited(a, FREE_LIMIT);
      assert.equal(refused.length + limited.length, inWindow.length, 'only 401s and 429s');
      assert.equal(
        refused.length,
        Math.min(FREE_LIMIT, inWindow.length),
        `window ending ${window}: the address gets exactly ${FREE_LIMIT} answers before 429s`,
      );
      perWindow.push(`window ${window}: ${refused.length} 401s, ${limited.length} 429s`);
    }
    assertServedAlone(
      served.map((s) => s.answer),
      FREE_LIMIT,
      'the organization calling from the flooded address',
    );
    assert.ok(
      served.some((s) => s.overlapped),
      'the organization was served while the flood was in flight',
    );

    // Another client address has its own budget.
    const otherAddress = '127.0.0.2';
    const bindable = await canBindFrom(server.url, otherAddress);
    if (bindable) {
      const elsewhere = dispatcher(new Client(server.url, { localAddress: otherAddress }));
      const res = await send(elsewhere, 'GET', org.statusPath);
      assert.equal(res.status, 401, `another address is not limited by the flood: ${res.body}`);
      assertRateHeaders(res, FREE_LIMIT);
    } else {
      t.diagnostic(`${otherAddress} cannot be bound here: the other-address check was skipped`);
    }
    t.diagnostic(`401 flood: ${answers.length} requests, ${IN_FLIGHT} in flight; ${perWindow.join('; ')}`);
    t.diagnostic(
      `organization on the flooded address: ${percentiles(served.filter((s) => s.overlapped).map((s) => s.answer.ms))}, all 200`,
    );
  });
  test('a burst of exactly the limit, all in flight at once, is served in full', async (t: TestContext) => {
    const org = await createOrg('free');
    const address = '127.0.0.3';
    const fromAddress = await canBindFrom(server.url, address);
    const orgPool = dispatcher(new Pool(server.url, { connections: FREE_LIMIT }));
    const addressPool = dispatcher(
      new Pool(server.url, { connections: FREE_LIMIT, ...(fromAddress && { localAddress: address }) }),
    );
    // Open every connection first (/healthz is not counted), so that the burst is truly at once.
    const open = (pool: Pool) =>
      flood(FREE_LIMIT, FREE_LIMIT, () => send(pool, 'GET', '/healthz')).then((answers) =>
        assert.ok(answers.every((a) => a.status === 200)),
      );
    await Promise.all([open(orgPool), ...(fromAddress ? [open(addressPool)] : [])]);

    const burst = (pool: Pool, headers: Record<string, string>) =>
      flood(FREE_LIMIT, FREE_LIMIT, () => send(pool, 'GET', org.statusPath, headers));
    const checks: [string, Pool, Record<string, string>, number][] = [
      ['the organization', orgPool, org.auth, 200],
      ...(fromAddress
        ? [
            ['an unauthenticated address', addressPool, {}, 401] as [
              string,
              Pool,
              Record<string, string>,
              number,
            ],
          ]
        : []),
    ];
    const outcomes = [];
    for (const [who, pool, headers, expected] of checks) {
      const answers = await burst(pool, headers);
      const statuses: Record<number, number> = {};
      for (const a of answers) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
      t.diagnostic(`${who}: ${FREE_LIMIT} requests at once → ${JSON.stringify(statuses)}`);
      const next = await send(pool, 'GET', org.statusPath, headers);
      outcomes.push({ who, expected, statuses, answers, next });
    }
    for (const { who, expected, statuses, answers, next } of outcomes) {
      assert.deepEqual(
        statuses,
        { [expected]: FREE_LIMIT },
        `${who}: every request within the limit is answered`,
      );
      if (byWindow([...answers, next]).size === 1) assertRateLimited(next, FREE_LIMIT);
    }
    if (!fromAddress) t.diagnostic(`${address} cannot be bound here: the address burst was skipped`);
  });
});
