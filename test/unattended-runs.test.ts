// Unattended runs end to end: a task pauses itself after its autoPauseAfterFailures failed runs
// and tells its destinations once (a signed task.paused webhook verified with standardwebhooks,
// an e-mail to a real SMTP listener, an SMS to the Twilio stand-in); deliverOn change and
// failure hold back the runs that are not news.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { recordRunEndAndQueueDeliveries } from '../src/db/sql/run-queue.ts';
import { tellTaskDestinations } from '../src/domain/task-notices.ts';
import type { ModelReply } from './helpers/model-server.ts';
import {
  finishedRun,
  insertTestRun,
  newTask,
  type Org,
  runNow,
  startWorkerService,
  unlimited,
} from './helpers/runs.ts';
import type { TestService } from './helpers/service.ts';
import { startSmsServer, type TestSmsServer } from './helpers/sms-server.ts';
import { startSmtpServer, type TestSmtpServer } from './helpers/smtp.ts';
import { waitFor } from './helpers/wait.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

type Hook = { headers: Record<string, unknown>; body: string };
type Event = { type: string; timestamp: string; data: Record<string, unknown> & { run?: { id: string } } };

const FAIL: ModelReply = { status: 400, error: 'model does not exist' };

describe('unattended runs', () => {
  let svc: TestService;
  let smtp: TestSmtpServer;
  let sms: TestSmsServer;
  let close: () => Promise<void>;
  let org: Org & { webhookSecret: string };
  const receivers: WebhookReceiver[] = [];
  /** What the model answers a prompt, run after run: `script:<id>` prompts take the next reply. */
  const scripts = new Map<string, ModelReply[]>();

  const receiver = async () => {
    const r = await startWebhookReceiver();
    receivers.push(r);
    return r;
  };
  const verified = (hook: Hook) =>
    new Webhook(org.webhookSecret).verify(hook.body, hook.headers as Record<string, string>) as Event;
  const events = (hook: WebhookReceiver) => hook.requests.map(verified);

  /** A task whose runs answer `replies` in turn. */
  async function scriptedTask(replies: ModelReply[], extra: Record<string, unknown> = {}) {
    const prompt = `script:${randomUUID()}`;
    scripts.set(prompt, replies);
    return newTask(svc, org, { prompt, ...extra });
  }

  const getTask = async (id: string) => {
    const res = await svc.call({ method: 'GET', url: `/api/svc/tasks/${id}`, key: org.apiKey });
    assert.equal(res.status, 200, res.raw);
    return res.body;
  };

  /** Runs the task now and returns the run once finished and its deliveries settled. */
  async function runSettled(taskId: string) {
    const id = await runNow(svc, org, taskId);
    await finishedRun(svc, org, id);
    return waitFor(`run ${id} deliveries to settle`, async () => {
      const res = await svc.call({ method: 'GET', url: `/api/svc/runs/${id}`, key: org.apiKey });
      return res.body.deliveryStatus !== 'pending' ? res.body : undefined;
    });
  }

  const noticeJobs = (taskId: string) =>
    svc.testDb.db.query<{ kind: string; channel: string; status: string }>(
      'SELECT kind, channel, status FROM deliveries WHERE task_id = $1 ORDER BY channel',
      [taskId],
    );

  before(async () => {
    smtp = await startSmtpServer();
    sms = await startSmsServer();
    const started = await startWorkerService(
      (prompt) => {
        const next = scripts.get(prompt)?.shift();
        return next ?? { content: 'Nothing scripted' };
      },
      {
        SVC_SMTP_URL: smtp.url,
        SVC_EMAIL_FROM: 'Scheduled tasks <tasks@example.com>',
        SVC_SMS_API_BASE: sms.url,
        SVC_SMS_ACCOUNT_SID: 'AC0123456789abcdef',
        SVC_SMS_AUTH_TOKEN: 'sms-auth-token-secret',
        SVC_SMS_FROM: '+15005550006',
        SVC_ALLOW_PRIVATE_URLS: 'true',
        SVC_DELIVERY_RETRY_SCHEDULE: '100ms,100ms',
      },
    );
    svc = started.svc;
    close = () => started.model.close();
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc.close();
    await close();
    await smtp.close();
    await sms.close();
    for (const r of receivers) await r.close();
  });

  test('a task is created with autoPauseAfterFailures 5 and deliverOn always unless told otherwise, and bad values are refused', async () => {
    const task = await getTask((await newTask(svc, org)).id);
    assert.equal(task.autoPauseAfterFailures, 5);
    assert.equal(task.deliverOn, 'always');
    assert.equal(task.consecutiveFailures, 0);
    assert.equal(task.pausedReason, undefined);
    for (const body of [
      { autoPauseAfterFailures: 101 },
      { autoPauseAfterFailures: -1 },
      { deliverOn: 'weekly' },
    ]) {
      const res = await svc.call({
        method: 'POST',
        url: '/api/svc/tasks',
        key: org.apiKey,
        body: { organizationId: org.organizationId, name: 'Bad', prompt: 'x', ...body },
      });
      assert.equal(res.status, 400, res.raw);
      assert.equal(res.body.error.code, 'validation_error');
    }
    const patched = await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${task.id}`,
      key: org.apiKey,
      body: { autoPauseAfterFailures: 0, deliverOn: 'change' },
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.equal(patched.body.autoPauseAfterFailures, 0);
    assert.equal(patched.body.deliverOn, 'change');
  });

  test('the second failed run in a row pauses a task set to 2, and its destinations get one task.paused notice each', async () => {
    const hook = await receiver();
    const task = await scriptedTask([FAIL, FAIL, FAIL], {
      name: 'Price watch',
      autoPauseAfterFailures: 2,
      destinations: [
        { type: 'webhook', value: hook.url },
        { type: 'email', value: 'ops@example.com' },
        { type: 'sms', value: '+14155550199' },
      ],
    });
    const first = await runSettled(task.id);
    assert.equal(first.status, 'failed');
    const afterFirst = await getTask(task.id);
    assert.equal(afterFirst.status, 'active');
    assert.equal(afterFirst.consecutiveFailures, 1);

    const second = await runSettled(task.id);
    const paused = await getTask(task.id);
    assert.equal(paused.status, 'paused');
    assert.equal(paused.nextRunAt, null);
    assert.equal(paused.consecutiveFailures, 2);
    assert.match(paused.pausedReason, /^Paused after 2 consecutive failed runs; the last failed with: \S/);
    assert.ok(paused.pausedReason.includes(second.error.slice(0, 40)), paused.pausedReason);

    const notice = await waitFor('the task.paused webhook', async () =>
      events(hook).find((e) => e.type === 'task.paused'),
    );
    assert.deepEqual(notice.data, {
      task: { id: task.id, name: 'Price watch' },
      reason: paused.pausedReason,
      consecutiveFailures: 2,
      lastRunId: second.id,
      lastError: second.error,
    });
    const mail = await waitFor('the pause e-mail', async () =>
      smtp.mails.find((m) => m.subject === 'Price watch: paused after 2 consecutive failed runs'),
    );
    assert.deepEqual(mail.to, ['ops@example.com']);
    assert.ok(mail.text?.includes(paused.pausedReason), mail.text);
    const text = await waitFor('the pause SMS', async () =>
      sms.requests.find((r) => r.form.To === '+14155550199' && r.form.Body?.includes('paused')),
    );
    assert.equal(
      text.form.Body,
      'Price watch: paused after 2 consecutive failed runs. Resume it to run it again.',
    );
    await waitFor('the notice jobs to be delivered', async () => {
      const jobs = await noticeJobs(task.id);
      return jobs.every((j) => j.status === 'delivered') ? jobs : undefined;
    });

    // A third failure (run now works on a paused task) counts, but the task is already paused:
    // no second notice.
    await runSettled(task.id);
    assert.equal((await getTask(task.id)).consecutiveFailures, 3);
    assert.deepEqual(
      (await noticeJobs(task.id)).map((j) => `${j.kind} ${j.channel}`),
      ['task.paused email', 'task.paused sms', 'task.paused webhook'],
    );
    assert.equal(events(hook).filter((e) => e.type === 'task.paused').length, 1);
    assert.deepEqual(
      events(hook)
        .map((e) => e.type)
        .sort(),
      ['run.failed', 'run.failed', 'run.failed', 'task.paused'],
    );

    const resumed = await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${task.id}`,
      key: org.apiKey,
      body: { status: 'active' },
    });
    assert.equal(resumed.status, 200, resumed.raw);
    assert.equal(resumed.body.status, 'active');
    assert.equal(resumed.body.consecutiveFailures, 0);
    assert.equal(resumed.body.pausedReason, undefined);
    assert.notEqual(resumed.body.nextRunAt, null);
  });

  test('pausedReason stays within 500 characters however long the last error is', async () => {
    const task = await scriptedTask(
      [{ status: 400, error: `Bad request: ${'very long reason '.repeat(200)}` }],
      {
        autoPauseAfterFailures: 1,
      },
    );
    const run = await runSettled(task.id);
    assert.ok(run.error.length > 500, `the error is long enough to be cut (${run.error.length})`);
    const paused = await getTask(task.id);
    assert.equal(paused.status, 'paused');
    assert.equal(paused.pausedReason.length, 500);
    assert.ok(
      paused.pausedReason.startsWith('Paused after 1 consecutive failed runs; the last failed with: '),
    );
  });

  test('queueing a notice keeps at most the newest 100 finished notice jobs of the task', async () => {
    const hook = await receiver();
    const task = await newTask(svc, org, { destinations: [{ type: 'webhook', value: hook.url }] });
    const db = svc.testDb.db;
    await db.query(
      `INSERT INTO deliveries (id, organization_id, run_id, task_id, kind, payload, channel, target, position,
                               status, created_at, updated_at)
       SELECT gen_random_uuid(), $2, NULL, $1, 'task.paused', '{}'::jsonb, 'webhook', 'https://old.example', 1,
              'delivered', now() - make_interval(mins => g), now()
         FROM generate_series(1, 120) AS g`,
      [task.id, org.organizationId],
    );
    await db.transaction((tx) =>
      tellTaskDestinations(tx, svc.service.deps.clock, task.id, {
        kind: 'task.cost_limit_reached',
        payload: {
          limitCents: 100,
          costCents: 100,
          periodStart: '2030-01-01T00:00:00Z',
          periodEnd: '2030-02-01T00:00:00Z',
        },
      }),
    );
    const [kept] = await db.query<{ finished: number; queued: number }>(
      `SELECT count(*) FILTER (WHERE kind = 'task.paused')::int AS finished,
              count(*) FILTER (WHERE kind = 'task.cost_limit_reached')::int AS queued
         FROM deliveries WHERE task_id = $1`,
      [task.id],
    );
    assert.deepEqual(kept, { finished: 100, queued: 1 });
  });

  test('autoPauseAfterFailures 0 never pauses the task, however many runs fail', async () => {
    const task = await scriptedTask([FAIL, FAIL, FAIL], { autoPauseAfterFailures: 0 });
    for (let i = 0; i < 3; i++) await runSettled(task.id);
    const after3 = await getTask(task.id);
    assert.equal(after3.status, 'active');
    assert.equal(after3.consecutiveFailures, 3);
    assert.equal(after3.pausedReason, undefined);
  });

  test('a completed run resets the count, so failures that are not consecutive never pause the task', async () => {
    const task = await scriptedTask([FAIL, { content: 'fine' }, FAIL], { autoPauseAfterFailures: 2 });
    await runSettled(task.id);
    await runSettled(task.id);
    assert.equal((await getTask(task.id)).consecutiveFailures, 0);
    await runSettled(task.id);
    const now = await getTask(task.id);
    assert.equal(now.status, 'active');
    assert.equal(now.consecutiveFailures, 1);
  });

  test('deliverOn change holds back an unchanged output, sends a changed one with previousRunId and a diff, and always sends a failure', async () => {
    const hook = await receiver();
    const task = await scriptedTask(
      [
        { content: 'Prices\nApples: 10\nPears: 4\n' },
        // The same after whitespace is normalised.
        { content: 'Prices\n  Apples:   10\nPears: 4' },
        { content: 'Prices\nApples: 12\nPears: 4\n' },
        FAIL,
      ],
      {
        deliverOn: 'change',
        destinations: [
          { type: 'webhook', value: hook.url },
          { type: 'email', value: 'changes@example.com' },
        ],
      },
    );
    const first = await runSettled(task.id);
    assert.equal(first.deliveryStatus, 'delivered');
    const [firstEvent] = events(hook);
    assert.equal(firstEvent?.type, 'run.completed');
    assert.equal(firstEvent?.data.previousRunId, undefined, 'nothing to compare the first output with');

    const same = await runSettled(task.id);
    assert.equal(same.status, 'completed');
    assert.equal(same.deliveryStatus, undefined, 'nothing was sent');
    assert.deepEqual(
      same.deliveries.map((d: { type: string; status: string; attempts: unknown[] }) => [
        d.type,
        d.status,
        d.attempts.length,
      ]),
      [
        ['webhook', 'suppressed', 0],
        ['email', 'suppressed', 0],
      ],
    );

    const changed = await runSettled(task.id);
    assert.equal(changed.deliveryStatus, 'delivered');
    const changedEvent = events(hook).find((e) => e.data.run?.id === changed.id);
    assert.ok(changedEvent);
    assert.equal(changedEvent.data.previousRunId, first.id);
    assert.equal(changedEvent.data.diffTruncated, false);
    assert.equal(
      changedEvent.data.diff,
      `--- run ${first.id}\n+++ run ${changed.id}\n@@ -1,3 +1,3 @@\n Prices\n-Apples: 10\n+Apples: 12\n Pears: 4\n`,
    );
    const mail = await waitFor('the changed output e-mail', async () =>
      smtp.mails.find((m) => m.to.includes('changes@example.com') && m.text?.includes('Apples: 12')),
    );
    assert.ok(mail.text?.includes(`Changes since the previous delivered run (${first.id}):`), mail.text);
    assert.ok(mail.text?.includes('+Apples: 12'));
    assert.ok(mail.html?.includes('-Apples: 10'));

    const failed = await runSettled(task.id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.deliveryStatus, 'delivered');
    assert.deepEqual(
      events(hook).map((e) => e.type),
      ['run.completed', 'run.completed', 'run.failed'],
    );
  });

  test('a task switched to deliverOn change compares with the output it last sent before the switch', async () => {
    const hook = await receiver();
    const task = await scriptedTask([{ content: 'Unchanged news' }, { content: 'Unchanged   news\n' }], {
      destinations: [{ type: 'webhook', value: hook.url }],
    });
    const sent = await runSettled(task.id);
    assert.equal(sent.deliveryStatus, 'delivered');
    const patched = await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${task.id}`,
      key: org.apiKey,
      body: { deliverOn: 'change' },
    });
    assert.equal(patched.status, 200, patched.raw);
    const same = await runSettled(task.id);
    assert.equal(same.deliveryStatus, undefined);
    assert.equal(same.deliveries[0].status, 'suppressed');
    assert.equal(hook.requests.length, 1);
  });

  test('deliverOn failure sends only failed runs', async () => {
    const hook = await receiver();
    const task = await scriptedTask([{ content: 'all good' }, FAIL], {
      deliverOn: 'failure',
      destinations: [{ type: 'webhook', value: hook.url }],
    });
    const ok = await runSettled(task.id);
    assert.equal(ok.deliveryStatus, undefined);
    assert.equal(ok.deliveries[0].status, 'suppressed');
    const failed = await runSettled(task.id);
    assert.equal(failed.deliveryStatus, 'delivered');
    assert.deepEqual(
      events(hook).map((e) => [e.type, e.data.run?.id]),
      [['run.failed', failed.id]],
    );
  });

  /**
   * Two running runs of the task, ended at the same moment by two transactions at once (as two
   * workers would, or lease recovery: no lease owner), with the same result.
   */
  const endTwoRunsAtOnce = async (
    taskId: string,
    result: { status: 'completed' | 'failed'; output: string | null; error: string | null },
  ) => {
    const db = svc.testDb.db;
    const now = new Date();
    const ids = [randomUUID(), randomUUID()];
    for (const id of ids) await insertTestRun(db, org, taskId, { id, now });
    await db.query(`UPDATE runs SET status = 'running', started_at = $2 WHERE id = ANY($1::uuid[])`, [
      ids,
      now,
    ]);
    const rows = await Promise.all(
      ids.map((id) =>
        db.transaction((tx) => recordRunEndAndQueueDeliveries(tx, id, null, { ...result, completedAt: now })),
      ),
    );
    return { ids, rows };
  };

  test('two runs of a change task ending at once with the same output are delivered once', async () => {
    const hook = await receiver();
    const task = await newTask(svc, org, {
      deliverOn: 'change',
      destinations: [{ type: 'webhook', value: hook.url }],
    });
    const ended = await endTwoRunsAtOnce(task.id, {
      status: 'completed',
      output: 'The same answer',
      error: null,
    });
    assert.deepEqual(ended.rows.map((r) => r?.delivery_status ?? null).sort(), ['pending', null].sort());
    const jobs = await svc.testDb.db.query<{ status: string }>(
      'SELECT status FROM deliveries WHERE run_id = ANY($1::uuid[]) ORDER BY status',
      [ended.ids],
    );
    assert.deepEqual(jobs.map((j) => j.status).sort(), ['pending', 'suppressed'].sort());
  });

  test('two failed runs of a task set to 2 ending at once pause it once, with one notice', async () => {
    const hook = await receiver();
    const task = await newTask(svc, org, {
      autoPauseAfterFailures: 2,
      destinations: [{ type: 'webhook', value: hook.url }],
    });
    await endTwoRunsAtOnce(task.id, { status: 'failed', output: null, error: 'boom' });
    const paused = await getTask(task.id);
    assert.equal(paused.status, 'paused');
    assert.equal(paused.consecutiveFailures, 2);
    const notices = await noticeJobs(task.id);
    assert.deepEqual(
      notices.map((n) => n.kind),
      ['task.paused'],
    );
  });

  test('a task.cost_limit_reached notice queued through the notice function reaches the webhook and e-mail destinations', async () => {
    const hook = await receiver();
    const task = await newTask(svc, org, {
      name: 'Budget',
      destinations: [
        { type: 'webhook', value: hook.url },
        { type: 'email', value: 'budget@example.com' },
      ],
    });
    const payload = {
      limitCents: 500,
      costCents: 512.5,
      periodStart: '2030-01-01T00:00:00.000Z',
      periodEnd: '2030-02-01T00:00:00.000Z',
    };
    // Queueing wakes the dispatchers itself (their poll is a minute: the wait below would time out).
    const queued = await svc.testDb.db.transaction((tx) =>
      tellTaskDestinations(tx, svc.service.deps.clock, task.id, { kind: 'task.cost_limit_reached', payload }),
    );
    assert.equal(queued, 2);
    const event = await waitFor('the cost limit webhook', async () => events(hook)[0]);
    assert.equal(event.type, 'task.cost_limit_reached');
    assert.deepEqual(event.data, { task: { id: task.id, name: 'Budget' }, ...payload });
    const mail = await waitFor('the cost limit e-mail', async () =>
      smtp.mails.find((m) => m.to.includes('budget@example.com')),
    );
    assert.equal(mail.subject, 'Budget: monthly cost limit reached');
    assert.ok(mail.text?.includes('$5.13 this month'), mail.text);
  });
});
