// A transaction PostgreSQL aborts for a conflict (a deadlock, a serialization failure) is not the
// request's fault and would succeed sent again: the API answers 503 with Retry-After, not 500.
// A real deadlock needs two transactions at once: PostgreSQL only.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toAppError } from '../src/http/plugins/errors.ts';
import { errorBody } from '../src/lib/errors.ts';
import { TEST_DATABASE_URL } from './helpers/db.ts';
import { newTask } from './helpers/runs.ts';
import { startTestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

describe('a transaction aborted by a deadlock', {
  skip:
    !TEST_DATABASE_URL && 'two transactions at once need a PostgreSQL server (run with TEST_DATABASE_URL)',
}, () => {
  test('is answered 503 with Retry-After and a message that says to retry, not 500', async () => {
    const svc = await startTestService();
    try {
      const { db } = svc.service.deps;
      const org = await svc.createOrg('paid');
      const [a, b] = [(await newTask(svc, org)).id, (await newTask(svc, org)).id];
      const lock = 'SELECT id FROM tasks WHERE id = $1 FOR UPDATE';
      // Two transactions taking the same two rows in opposite orders: PostgreSQL aborts one.
      // Settled as it is made: its rejection is looked at below, not left unhandled meanwhile.
      let second: Promise<PromiseSettledResult<void>[]> = Promise.resolve([]);
      const first = db.transaction(async (tx) => {
        await tx.query(lock, [a]);
        second = Promise.allSettled([
          db.transaction(async (other) => {
            await other.query(lock, [b]);
            await other.query(lock, [a]);
          }),
        ]);
        await waitFor('the other transaction to wait for a lock', async () => {
          const rows = await db.query(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
          );
          return rows.length ? true : undefined;
        });
        await tx.query(lock, [b]);
      });
      const outcomes = [...(await Promise.allSettled([first])), ...(await second)];
      const failures = outcomes.filter((o) => o.status === 'rejected');
      assert.equal(failures.length, 1, 'one of the two was aborted');
      const reason = (failures[0] as PromiseRejectedResult).reason as Error & { code?: string };
      assert.equal(reason.code, '40P01');
      const answer = toAppError(reason);
      assert.equal(answer.status, 503);
      assert.equal(answer.headers?.['retry-after'], '1');
      const body = errorBody(answer);
      assert.equal(body.error.code, 'service_unavailable');
      assert.match(body.error.message, /retry/);
      assert.doesNotMatch(body.error.message, /deadlock|tasks|SELECT/i, 'no database detail in the answer');
    } finally {
      await svc.close();
    }
  });
});
