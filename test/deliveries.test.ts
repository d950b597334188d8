// Delivery end to end: runs finish in the worker, the dispatcher delivers them to a real SMTP
// server, a Twilio-compatible receiver and webhook receivers that verify the signatures with
// the standardwebhooks library.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { MAX_ATTEMPTS_KEPT } from '../src/db/sql/deliveries.ts';
import { findOrganization } from '../src/db/sql/organizations.ts';
import { createChannels } from '../src/delivery/channels/index.ts';
import { DeliveryDispatcher } from '../src/delivery/dispatcher.ts';
import { openWebhookSecret } from '../src/domain/organizations.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { type ModelServer, startModelServer } from './helpers/model-server.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService, unlimited } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { startSmsServer, type TestSmsServer } from './helpers/sms-server.ts';
import { startSmtpServer, type TestSmtpServer } from './helpers/smtp.ts';
import { waitFor } from './helpers/wait.ts';
import {
  type ReceiverReply,
  startWebhookReceiver,
  type WebhookReceiver,
} from './helpers/webhook-receiver.ts';

type OrgWithSecret = Org & { webhookSecret: string };

/** The run once its deliveries are settled (deliveryStatus no longer pending). */
async function settledRun(svc: TestService, org: Org, runId: string) {
  await finishedRun(svc, org, runId);
  return waitFor(`run ${runId} deliveries to settle`, async () => {
    const res = await svc.call({ method: 'GET', url: `/api/svc/runs/${runId}`, key: org.apiKey });
    return res.body.deliveryStatus !== 'pending' ? res.body : undefined;
  });
}

function verified(secret: string, hook: { headers: Record<string, unknown>; body: string }) {
  return new Webhook(secret).verify(hook.body, hook.headers as Record<string, string>) as {
    type: string;
    timestamp: string;
    data: { run: { id: string; status: string; output?: string }; task: { id: string; name: string } };
  };
}

describe('delivery', () => {
  let svc: TestService;
  let model: ModelServer;
  let smtp: TestSmtpServer;
  let sms: TestSmsServer;
  let org: OrgWithSecret;
  const receivers: WebhookReceiver[] = [];
  const receiver = async (...replies: ReceiverReply[]) => {
    const r = await startWebhookReceiver(replies);
    receivers.push(r);
    return r;
  };

  before(async () => {
    smtp = await startSmtpServer({ rejectRecipient: (a) => a.startsWith('nobody@') });
    sms = await startSmsServer();
    ({ svc, model } = await startWorkerService(
      (prompt) => (prompt.startsWith('html') ? { content: '**Bold** <script>alert(1)</script>' } : {}),
      {
        SVC_SMTP_URL: smtp.url,
        SVC_EMAIL_FROM: 'Scheduled tasks <tasks@example.com>',
        SVC_SMS_API_BASE: sms.url,
        SVC_SMS_ACCOUNT_SID: 'AC0123456789abcdef',
        SVC_SMS_AUTH_TOKEN: 'sms-auth-token-secret',
        SVC_SMS_FROM: '+15005550006',
        SVC_ALLOW_PRIVATE_URLS: 'true',
        SVC_PUBLIC_URL: 'https://tasks.example.com',
        SVC_DELIVERY_RETRY_SCHEDULE: '100ms,100ms',
      },
    ));
    org = (await svc.createOrg('paid')) as OrgWithSecret;
    await unlimited(svc, org);
  });
  after(async () => {
    await svc.close();
    await model.close();
    await smtp.close();
    await sms.close();
    for (const r of receivers) await r.close();
  });

  test('a finished run reaches its e-mail, SMS and webhook destinations and the legacy flags, each once', async () => {
    const hook = await receiver();
    const task = await newTask(svc, org, {
      name: 'Morning digest',
      prompt: 'html digest',
      deliveryEmail: true,
      deliveryEmailAddress: 'legacy@example.com',
      deliverySms: true,
      deliveryPhoneNumber: '+14155550123',
      destinations: [
        { type: 'email', value: 'team@example.com', label: 'Team' },
        // The same address as the legacy flag: delivered once.
        { type: 'email', value: 'LEGACY@example.com' },
        { type: 'webhook', value: `${hook.url}/hooks/digest` },
      ],
    });
    const run = await settledRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'completed');
    assert.equal(run.deliveryStatus, 'delivered', JSON.stringify(run.deliveries));
    assert.deepEqual(
      run.deliveries.map(
        (d: { type: string; value: string; status: string }) => `${d.type} ${d.value} ${d.status}`,
      ),
      [
        'email legacy@example.com delivered',
        'sms +14155550123 delivered',
        'email team@example.com delivered',
        `webhook ${hook.url}/hooks/digest delivered`,
      ],
    );
    for (const d of run.deliveries) assert.equal(d.attempts.length, 1);

    const mails = smtp.mails.filter((m) => m.subject?.startsWith('Morning digest'));
    assert.deepEqual(mails.map((m) => m.to.join()).sort(), ['legacy@example.com', 'team@example.com']);
    const [mail] = mails;
    assert.ok(mail);
    assert.equal(mail.subject, 'Morning digest: completed');
    assert.match(
      mail.text ?? '',
      /\*\*Bold\*\* <script>alert\(1\)<\/script>/,
      'the text body has the output as is',
    );
    assert.match(mail.html ?? '', /<strong>Bold<\/strong>/);
    assert.ok(!mail.html?.includes('<script>'), 'HTML in the output is neutralised');
    assert.match(mail.html ?? '', /&lt;script&gt;/);
    assert.ok(mail.text?.includes(`https://tasks.example.com/api/svc/runs/${run.id}`), 'a link to the run');

    const [message] = sms.requests;
    assert.ok(message);
    assert.equal(message.path, '/2010-04-01/Accounts/AC0123456789abcdef/Messages.json');
    assert.equal(
      message.authorization,
      `Basic ${Buffer.from('AC0123456789abcdef:sms-auth-token-secret').toString('base64')}`,
    );
    assert.equal(message.form.To, '+14155550123');
    assert.equal(message.form.From, '+15005550006');
    assert.match(message.form.Body ?? '', /^Morning digest: /);

    const [delivered] = hook.requests;
    assert.ok(delivered);
    const payload = verified(org.webhookSecret, delivered);
    assert.equal(payload.type, 'run.completed');
    assert.equal(payload.data.run.id, run.id);
    assert.equal(payload.data.run.output, run.output);
    assert.deepEqual(payload.data.task, { id: task.id, name: 'Morning digest' });
    const webhookDelivery = run.deliveries.find((d: { type: string }) => d.type === 'webhook');
    assert.equal(delivered.headers['webhook-id'], webhookDelivery.id);
    assert.ok(!JSON.stringify(svc.logs).includes('sms-auth-token-secret'), 'no secret in the logs');
  });

  test("a destination added by its own route, or a legacy flag set by an update, reaches the task's next run", async () => {
    // A run's end looks for targets only for a task whose row names any (run-queue.ts).
    const task = await newTask(svc, org, { name: 'Late destinations', prompt: 'late destinations' });
    const first = await settledRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(first.status, 'completed');
    assert.deepEqual(first.deliveries ?? [], []);
    const added = await svc.call({
      method: 'POST',
      url: `/api/svc/tasks/${task.id}/destinations`,
      key: org.apiKey,
      body: { type: 'email', value: 'late@example.com' },
    });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    const second = await settledRun(svc, org, await runNow(svc, org, task.id));
    assert.deepEqual(
      second.deliveries.map((d: { type: string; value: string }) => `${d.type} ${d.value}`),
      ['email late@example.com'],
    );
    const removed = await svc.call({
      method: 'DELETE',
      url: `/api/svc/tasks/${task.id}/destinations/${added.body.id}`,
      key: org.apiKey,
    });
    assert.equal(removed.status, 204);
    const flagged = await svc.call({
      method: 'PATCH',
      url: `/api/svc/tasks/${task.id}`,
      key: org.apiKey,
      body: { deliverySms: true, deliveryPhoneNumber: '+14155550199' },
    });
    assert.equal(flagged.status, 200, JSON.stringify(flagged.body));
    const third = await settledRun(svc, org, await runNow(svc, org, task.id));
    assert.deepEqual(
      third.deliveries.map((d: { type: string; value: string }) => `${d.type} ${d.value}`),
      ['sms +14155550199'],
    );
  });

  test('a receiver that answers 500, 500, 200 gets three attempts with one webhook-id and the run is delivered', async () => {
    const hook = await receiver({ status: 500 }, { status: 500, body: 'still broken' }, { status: 200 });
    const task = await newTask(svc, org, { destinations: [{ type: 'webhook', value: hook.url }] });
    const run = await settledRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.deliveryStatus, 'delivered');
    assert.equal(hook.requests.length, 3);
    assert.equal(new Set(hook.requests.map((r) => r.headers['webhook-id'])).size, 1);
    for (const r of hook.requests) verified(org.webhookSecret, r);
    const [delivery] = run.deliveries;
    assert.deepEqual(
      delivery.attempts.map((a: { attempt: number; outcome: string; statusCode: number }) => [
        a.attempt,
        a.outcome,
        a.statusCode,
      ]),
      [
        [1, 'failed', 500],
        [2, 'failed', 500],
        [3, 'delivered', 200],
      ],
    );
    assert.equal(delivery.attempts[1].response, 'still broken');
    // Times in the answer are ISO 8601 instants in UTC, the delivery's after its last attempt began.
    assert.equal(new Date(delivery.deliveredAt).toISOString(), delivery.deliveredAt);
    assert.ok(Date.parse(delivery.deliveredAt) >= Date.parse(delivery.attempts[2].at));
    assert.equal(delivery.nextAttemptAt, undefined, 'a delivered delivery has no next attempt');
  });

  test('a receiver that always fails ends failed with every attempt listed, and a redelivery retries it', async () => {
    const hook = await receiver({ status: 503 }, { status: 503 }, { status: 503 }, { status: 204 });
    const task = await newTask(svc, org, { destinations: [{ type: 'webhook', value: hook.url }] });
    const runId = await runNow(svc, org, task.id);
    const run = await settledRun(svc, org, runId);
    assert.equal(run.deliveryStatus, 'failed');
    assert.equal(run.deliveries[0].status, 'failed');
    assert.equal(
      run.deliveries[0].attempts.length,
      3,
      'the first attempt and the two retries of the schedule',
    );
    assert.match(run.deliveries[0].error, /503/);

    const again = await svc.call({
      method: 'POST',
      url: `/api/svc/runs/${runId}/redeliver`,
      key: org.apiKey,
    });
    assert.equal(again.status, 202, again.raw);
    const redelivered = await settledRun(svc, org, runId);
    assert.equal(redelivered.deliveryStatus, 'delivered');
    assert.equal(redelivered.deliveries[0].attempts.length, 4);
    const nothingLeft = await svc.call({
      method: 'POST',
      url: `/api/svc/runs/${runId}/redeliver`,
      key: org.apiKey,
    });
    assert.equal(nothingLeft.status, 409);
  });

  test('a delivery redelivered again and again keeps only its latest 50 attempts, numbered as they were made', async () => {
    // 410 Gone is not retried: each redelivery is one more attempt, failed at once.
    const hook = await receiver(...Array.from({ length: MAX_ATTEMPTS_KEPT + 5 }, () => ({ status: 410 })));
    const task = await newTask(svc, org, { destinations: [{ type: 'webhook', value: hook.url }] });
    const runId = await runNow(svc, org, task.id);
    let run = await settledRun(svc, org, runId);
    const total = MAX_ATTEMPTS_KEPT + 3;
    for (let made = 1; made < total; made++) {
      const again = await svc.call({
        method: 'POST',
        url: `/api/svc/runs/${runId}/redeliver`,
        key: org.apiKey,
      });
      assert.equal(again.status, 202, again.raw);
      run = await settledRun(svc, org, runId);
      assert.equal(run.deliveryStatus, 'failed');
    }
    assert.equal(hook.requests.length, total, 'every redelivery was attempted');
    const attempts = run.deliveries[0].attempts.map((a: { attempt: number }) => a.attempt);
    assert.equal(attempts.length, MAX_ATTEMPTS_KEPT);
    assert.deepEqual(
      attempts,
      Array.from({ length: MAX_ATTEMPTS_KEPT }, (_, i) => total - MAX_ATTEMPTS_KEPT + 1 + i),
    );
    const kept = await svc.testDb.db.query<{ kept: number }>(
      'SELECT count(*)::int AS kept FROM delivery_attempts WHERE delivery_id = $1',
      [run.deliveries[0].id],
    );
    assert.equal(
      kept[0]?.kept,
      MAX_ATTEMPTS_KEPT,
      'the older attempts are gone from the database, not only from the answer',
    );
  });

  test('a 302 is a failed attempt and its target is never called', async () => {
    const elsewhere = await receiver();
    const hook = await receiver(
      ...[0, 1, 2].map(() => ({ status: 302, headers: { location: `${elsewhere.url}/stolen` } })),
    );
    const task = await newTask(svc, org, { destinations: [{ type: 'webhook', value: hook.url }] });
    const run = await settledRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.deliveryStatus, 'failed');
    assert.equal(run.deliveries[0].attempts[0].statusCode, 302);
    assert.equal(elsewhere.requests.length, 0);
  });

  test('a failed run is delivered too, as run.failed', async () => {
    const hook = await receiver();
    // A skill whose required source is not attached makes the run fail.
    const skill = await svc.call({
      method: 'POST',
      url: '/api/svc/skills',
      key: org.apiKey,
      body: {
        organizationId: org.organizationId,
        name: 'Needs',
        content: 'x',
        frontmatter: { requiredSources: ['gone'] },
      },
    });
    const failing = await newTask(svc, org, {
      skillIds: [skill.body.id],
      destinations: [{ type: 'webhook', value: hook.url }],
    });
    const run = await settledRun(svc, org, await runNow(svc, org, failing.id));
    assert.equal(run.status, 'failed');
    assert.equal(run.deliveryStatus, 'delivered');
    const payload = verified(
      org.webhookSecret,
      hook.requests[0] as { headers: Record<string, unknown>; body: string },
    );
    assert.equal(payload.type, 'run.failed');
    assert.equal(payload.data.run.status, 'failed');
  });

  test('a rejected e-mail recipient fails that destination only, without retries; the run stays completed', async () => {
    const hook = await receiver();
    const task = await newTask(svc, org, {
      destinations: [
        { type: 'email', value: 'nobody@example.com' },
        { type: 'webhook', value: hook.url },
      ],
    });
    const run = await settledRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'completed');
    assert.equal(run.deliveryStatus, 'failed');
    const [email, webhook] = run.deliveries;
    assert.equal(email.status, 'failed');
    assert.equal(email.attempts.length, 1, 'a permanent refusal is not retried');
    assert.match(email.error, /550/);
    assert.equal(webhook.status, 'delivered');
  });
});

describe('delivery without providers', () => {
  test('missing SMTP and SMS configuration fails those destinations with a clear error, never the run', async () => {
    const { svc, model } = await startWorkerService(() => ({}));
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org, {
        destinations: [
          { type: 'email', value: 'someone@example.com' },
          { type: 'sms', value: '+14155550123' },
        ],
      });
      const run = await settledRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.status, 'completed');
      assert.equal(run.deliveryStatus, 'failed');
      assert.match(run.deliveries[0].error, /SVC_SMTP_URL/);
      assert.match(run.deliveries[1].error, /SVC_SMS_/);
    } finally {
      await svc.close();
      await model.close();
    }
  });

  test('a webhook to a private address is refused unless SVC_ALLOW_PRIVATE_URLS is true', async () => {
    const hook = await startWebhookReceiver();
    const { svc, model } = await startWorkerService(() => ({}));
    try {
      const org = await svc.createOrg('paid');
      const task = await newTask(svc, org, { destinations: [{ type: 'webhook', value: hook.url }] });
      const run = await settledRun(svc, org, await runNow(svc, org, task.id));
      assert.equal(run.deliveryStatus, 'failed');
      assert.match(run.deliveries[0].error, /private or loopback/);
      assert.equal(hook.requests.length, 0);
    } finally {
      await svc.close();
      await model.close();
      await hook.close();
    }
  });
});

test('a restart between a failed attempt and its retry still delivers exactly once', async () => {
  const clock = new ManualClock('2026-11-23T08:00:00Z');
  const model = await startModelServer();
  const hook = await startWebhookReceiver([{ status: 500 }]);
  const svc = await startTestService({
    startLoops: true,
    clock,
    env: {
      SVC_MODEL_BASE_URL: model.url,
      SVC_MODEL_API_KEY: 'sk-test',
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_DELIVERY_RETRY_SCHEDULE: '1m',
    },
  });
  let second: DeliveryDispatcher | undefined;
  try {
    const org = (await svc.createOrg('paid')) as OrgWithSecret;
    const task = await newTask(svc, org, { destinations: [{ type: 'webhook', value: hook.url }] });
    const runId = await runNow(svc, org, task.id);
    await waitFor('the first attempt', async () => (hook.requests.length === 1 ? true : undefined));
    const afterFirst = await waitFor('the failed attempt to be recorded', async () => {
      const run = (await svc.call({ method: 'GET', url: `/api/svc/runs/${runId}`, key: org.apiKey })).body;
      return run.deliveries?.[0]?.attempts.length === 1 ? run : undefined;
    });
    assert.equal(afterFirst.deliveries[0].status, 'pending');
    const next = afterFirst.deliveries[0].nextAttemptAt;
    assert.equal(new Date(next).toISOString(), next, 'the next attempt, an ISO 8601 instant in UTC');

    // The process stops before the retry is due; a new one starts with nothing but the database.
    await svc.service.dispatcher?.stop(0);
    clock.advance(2 * 60_000);
    const { deps } = svc.service;
    second = new DeliveryDispatcher(
      deps,
      createChannels({
        config: deps.config,
        secretOf: async (id) => {
          const row = await findOrganization(deps.db, id);
          if (!row) throw new Error('no organization');
          return openWebhookSecret(deps, row);
        },
      }),
    );
    await second.start();
    const run = await settledRun(svc, org, runId);
    assert.equal(run.deliveryStatus, 'delivered');
    assert.equal(hook.requests.length, 2, 'one failed attempt, one delivery; nothing sent twice');
    assert.equal(hook.requests[0]?.headers['webhook-id'], hook.requests[1]?.headers['webhook-id']);
    assert.deepEqual(
      run.deliveries[0].attempts.map((a: { outcome: string }) => a.outcome),
      ['failed', 'delivered'],
    );
    // Nothing is due any more: another look sends nothing.
    second.wake();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(hook.requests.length, 2);
  } finally {
    await second?.stop(0);
    await svc.close();
    await model.close();
    await hook.close();
  }
});
