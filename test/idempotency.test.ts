import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { pruneIdempotencyKeys } from '../src/db/sql/idempotency-keys.ts';
import {
  claimIdempotencyKey,
  finishIdempotencyKey,
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_MAX_ANSWER_BYTES,
  IDEMPOTENCY_MAX_KEYS_PER_ORGANIZATION,
  IDEMPOTENCY_RETENTION_MS,
  requestFingerprint,
} from '../src/domain/idempotency.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { startTestService, type TestService } from './helpers/service.ts';

describe('Idempotency-Key on POST', () => {
  const clock = new ManualClock('2027-05-03T08:00:00Z');
  let svc: TestService;
  let org: { organizationId: string; apiKey: string };
  let other: { organizationId: string; apiKey: string };
  let n = 0;
  const taskBody = (o = org) => ({
    organizationId: o.organizationId,
    name: `Brief ${++n}`,
    prompt: 'Summarise',
  });
  const post = (key: string | undefined, body: unknown, o = org) =>
    svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: o.apiKey,
      body,
      ...(key !== undefined && { headers: { 'idempotency-key': key } }),
    });
  const taskCount = async (o = org) =>
    (
      await svc.call({
        method: 'GET',
        url: `/api/svc/tasks?organizationId=${o.organizationId}`,
        key: o.apiKey,
      })
    ).body.length as number;

  before(async () => {
    svc = await startTestService({ clock });
    org = await svc.createOrg('paid');
    other = await svc.createOrg('paid');
  });
  after(() => svc.close());

  test('a repeat with the same key and body replays the first answer and creates nothing', async () => {
    const body = taskBody();
    const first = await post('create-1', body);
    assert.equal(first.status, 201, first.raw);
    assert.equal(first.headers['idempotent-replayed'], undefined);
    const before = await taskCount();
    // Key order and whitespace do not make another request.
    const reordered = JSON.stringify({
      prompt: body.prompt,
      name: body.name,
      organizationId: body.organizationId,
    });
    const again = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: org.apiKey,
      body: ` ${reordered}`,
      headers: { 'idempotency-key': 'create-1', 'content-type': 'application/json' },
    });
    assert.equal(again.status, 201);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.raw, first.raw);
    assert.equal(again.headers['content-type'], first.headers['content-type']);
    assert.equal(await taskCount(), before);
  });

  test('requests without the header are not deduplicated', async () => {
    const body = taskBody();
    const a = await post(undefined, body);
    const b = await post(undefined, body);
    assert.equal(a.status, 201);
    assert.equal(b.status, 201);
    assert.notEqual(a.body.id, b.body.id);
    assert.equal(b.headers['idempotent-replayed'], undefined);
  });

  test('the same key with another body is a 422 idempotency_key_reused and runs nothing', async () => {
    assert.equal((await post('create-2', taskBody())).status, 201);
    const before = await taskCount();
    const res = await post('create-2', taskBody());
    assert.equal(res.status, 422, res.raw);
    assert.equal(res.body.error.code, 'idempotency_key_reused');
    assert.equal(await taskCount(), before);
  });

  test('the same key on another path is another request: 422', async () => {
    const created = await post('create-3', taskBody());
    const res = await svc.call({
      method: 'POST',
      url: `/api/svc/tasks/${created.body.id}/run`,
      key: org.apiKey,
      headers: { 'idempotency-key': 'create-3' },
    });
    assert.equal(res.status, 422, res.raw);
  });

  test('a key that is empty, too long or not printable ASCII is a 400 naming the header', async () => {
    for (const key of ['x'.repeat(256), 'caf\u00e9', 'tab\there']) {
      const res = await svc.call({
        method: 'POST',
        url: '/api/svc/tasks',
        key: org.apiKey,
        body: taskBody(),
        headers: { 'idempotency-key': key },
      });
      assert.equal(res.status, 400, `${JSON.stringify(key)}: ${res.raw}`);
      assert.equal(res.body.error.details[0].path, '/headers/idempotency-key');
    }
    assert.equal((await post('k'.repeat(255), taskBody())).status, 201, 'the 255-character key is fine');
  });

  test('a request that fails validation keeps nothing: the corrected request runs with the same key', async () => {
    const bad = await post('create-4', { organizationId: org.organizationId, name: 'No prompt' });
    assert.equal(bad.status, 400);
    const good = await post('create-4', taskBody());
    assert.equal(good.status, 201, good.raw);
    assert.equal(good.headers['idempotent-replayed'], undefined);
  });

  test('a 4xx answer of a handler is kept and replayed like a success', async () => {
    const url = '/api/svc/tasks/00000000-0000-4000-8000-000000000000/run';
    const call = () =>
      svc.call({ method: 'POST', url, key: org.apiKey, headers: { 'idempotency-key': 'run-missing' } });
    const first = await call();
    assert.equal(first.status, 404);
    const again = await call();
    assert.equal(again.status, 404);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.raw, first.raw);
  });

  test('keys belong to an organization: another organization may use the same key', async () => {
    const mine = await post('shared-key', taskBody());
    const theirs = await post('shared-key', taskBody(other), other);
    assert.equal(mine.status, 201);
    assert.equal(theirs.status, 201, theirs.raw);
    assert.equal(theirs.headers['idempotent-replayed'], undefined);
    assert.equal(theirs.body.organizationId, other.organizationId);
  });

  test('concurrent requests with one key create exactly one task; the others get 409 or the replay', async () => {
    const body = taskBody();
    const before = await taskCount();
    const answers = await Promise.all(Array.from({ length: 5 }, () => post('concurrent', body)));
    const statuses = answers.map((a) => a.status);
    const fresh = answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === undefined);
    assert.equal(fresh.length, 1, statuses.join());
    for (const a of answers) {
      if (a === fresh[0]) continue;
      if (a.status === 409) assert.equal(a.body.error.code, 'conflict');
      else assert.equal(a.headers['idempotent-replayed'], 'true', `${a.status} ${a.raw}`);
    }
    assert.equal(await taskCount(), before + 1);
  });

  test('a key in flight answers 409, and one whose process died is taken over after its lease', async () => {
    const body = taskBody();
    const fingerprint = requestFingerprint('POST', '/api/svc/tasks', body);
    await svc.testDb.db.query(
      `INSERT INTO idempotency_keys (organization_id, key, request_hash, created_at, locked_until, owner)
       VALUES ($1, 'crashed', $2, $3, $4, 'a process that died')`,
      [org.organizationId, fingerprint, clock.now(), new Date(clock.now().getTime() + IDEMPOTENCY_LEASE_MS)],
    );
    const blocked = await post('crashed', body);
    assert.equal(blocked.status, 409, blocked.raw);
    assert.equal(blocked.body.error.code, 'conflict');
    const start = clock.now();
    clock.set(start.getTime() + IDEMPOTENCY_LEASE_MS);
    try {
      const taken = await post('crashed', body);
      assert.equal(taken.status, 201, taken.raw);
      assert.equal(taken.headers['idempotent-replayed'], undefined);
      const replay = await post('crashed', body);
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      assert.equal(replay.body.id, taken.body.id);
    } finally {
      clock.set(start);
    }
  });

  test('after 24 hours the key is free again, and the housekeeping pruning deletes it', async () => {
    const body = taskBody();
    const start = clock.now();
    const first = await post('daily', body);
    try {
      clock.set(start.getTime() + IDEMPOTENCY_RETENTION_MS - 1000);
      const replay = await post('daily', body);
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      assert.equal(replay.body.id, first.body.id);

      clock.set(start.getTime() + IDEMPOTENCY_RETENTION_MS);
      const fresh = await post('daily', body);
      assert.equal(fresh.status, 201);
      assert.equal(fresh.headers['idempotent-replayed'], undefined);
      assert.notEqual(fresh.body.id, first.body.id);

      // The keys recorded at `start` are now past their retention; the one just renewed is not.
      const pruned = await pruneIdempotencyKeys(svc.testDb.db, clock.now(), IDEMPOTENCY_RETENTION_MS);
      assert.ok(pruned >= 1, `pruned ${pruned}`);
      const left = await svc.testDb.db.query<{ key: string }>(
        'SELECT key FROM idempotency_keys WHERE organization_id = $1',
        [org.organizationId],
      );
      const keys = left.map((r) => r.key);
      assert.ok(keys.includes('daily'), keys.join());
      assert.ok(!keys.includes('create-1'), keys.join());
    } finally {
      clock.set(start);
    }
  });

  test('a 5xx answer or one above the size bound is not kept: the next request with the key runs again', async () => {
    const deps = svc.service.deps;
    for (const [key, answer] of [
      ['server-error', { status: 500, headers: {}, body: '{"error":{}}' }],
      ['huge', { status: 201, headers: {}, body: 'x'.repeat(IDEMPOTENCY_MAX_ANSWER_BYTES + 1) }],
    ] as const) {
      const first = await claimIdempotencyKey(deps, org.organizationId, key, 'fingerprint');
      assert.ok(first.run);
      await finishIdempotencyKey(deps, org.organizationId, key, first.owner, answer);
      const again = await claimIdempotencyKey(deps, org.organizationId, key, 'fingerprint');
      assert.ok(again.run, `${key}: the retry runs`);
    }
  });

  test('the admin API ignores the header: its answers (new keys among them) are never stored', async () => {
    const create = () =>
      svc.call({
        method: 'POST',
        url: '/api/admin/organizations',
        admin: true,
        body: { name: 'Twice' },
        headers: { 'idempotency-key': 'admin-1' },
      });
    const a = await create();
    const b = await create();
    assert.equal(a.status, 201, a.raw);
    assert.equal(b.status, 201, b.raw);
    assert.notEqual(a.body.organizationId, b.body.organizationId);
    assert.equal(b.headers['idempotent-replayed'], undefined);
  });

  test('past 10,000 keys within 24 hours a new key is a 429; a key already held still replays', async () => {
    const crowded = await svc.createOrg('paid');
    const held = await post('held', taskBody(crowded), crowded);
    assert.equal(held.status, 201);
    await svc.testDb.db.query(
      `INSERT INTO idempotency_keys (organization_id, key, request_hash, created_at, owner, status_code, response_body)
       SELECT $1, 'filler-' || i, 'h', $2, 'o', 201, '{}' FROM generate_series(2, $3::int) AS i`,
      [crowded.organizationId, clock.now(), IDEMPOTENCY_MAX_KEYS_PER_ORGANIZATION],
    );
    const refused = await post('one-too-many', taskBody(crowded), crowded);
    assert.equal(refused.status, 429, refused.raw);
    assert.equal(refused.body.error.code, 'rate_limited');
    assert.equal(refused.headers['retry-after'], '3600');
    const replay = await svc.call({
      method: 'POST',
      url: '/api/svc/tasks',
      key: crowded.apiKey,
      body: { organizationId: crowded.organizationId, name: held.body.name, prompt: 'Summarise' },
      headers: { 'idempotency-key': 'held' },
    });
    assert.equal(replay.headers['idempotent-replayed'], 'true', replay.raw);
  });
});
