// A task's delete takes its runs in flight before the task's row, in the order every other
// writer of both takes them (a worker's write batch locks the runs it ends, then their tasks).
// Deleting the task first and its runs by cascade, a delete meeting a batch that held a run of
// the task deadlocked with it: PostgreSQL aborted one of the two after its deadlock timeout (1 s),
// the delete answering 500 when it was the one. Two transactions at once: PostgreSQL only.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TEST_DATABASE_URL } from './helpers/db.ts';
import { insertTestRun, newTask } from './helpers/runs.ts';
import { startTestService } from './helpers/service.ts';
import { waitFor } from './helpers/wait.ts';

describe('deleting a task', {
  skip:
    !TEST_DATABASE_URL && 'two transactions at once need a PostgreSQL server (run with TEST_DATABASE_URL)',
}, () => {
  for (const conditional of [false, true]) {
    test(`${conditional ? 'with If-Match ' : ''}waits for a write batch that holds its running run, instead of deadlocking with it`, async () => {
      const svc = await startTestService();
      try {
        const { db } = svc.service.deps;
        const org = await svc.createOrg('paid');
        const task = await newTask(svc, org);
        const runId = await insertTestRun(db, org, task.id, { runningAs: 'w1' });
        const etag = conditional
          ? String(
              (await svc.call({ method: 'GET', url: `/api/svc/tasks/${task.id}`, key: org.apiKey })).headers
                .etag,
            )
          : undefined;
        let deleted: ReturnType<typeof svc.call> | undefined;
        // A write batch's locks (lockRunsAndTasksStatement): the run, then (once the delete waits)
        // its task; then the run's end.
        await db.transaction(async (tx) => {
          await tx.query('SELECT id FROM runs WHERE id = $1 FOR NO KEY UPDATE', [runId]);
          deleted = svc.call({
            method: 'DELETE',
            url: `/api/svc/tasks/${task.id}`,
            key: org.apiKey,
            ...(etag && { headers: { 'if-match': etag } }),
          });
          await waitFor('the delete to wait for a lock', async () => {
            const rows = await db.query(
              "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            );
            return rows.length ? true : undefined;
          });
          await tx.query('SELECT id FROM tasks WHERE id = $1 FOR NO KEY UPDATE', [task.id]);
          await tx.query(`UPDATE runs SET status = 'completed', lease_owner = NULL WHERE id = $1`, [runId]);
        });
        const res = await deleted;
        assert.equal(res?.status, 204, JSON.stringify(res?.body));
        assert.deepEqual(await db.query('SELECT id FROM runs WHERE task_id = $1', [task.id]), []);
        assert.deepEqual(await db.query('SELECT id FROM tasks WHERE id = $1', [task.id]), []);
      } finally {
        await svc.close();
      }
    });
  }
});
