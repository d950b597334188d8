// Adversarial: e-mail destinations. A destination is one address, and the service sends to
// exactly the address it saved. Mail libraries read display names (`Name <a@b>`), lists
// (`a@b, c@d`), groups (`g: a@b;`), comments and quoted parts into other or more recipients,
// so those forms are refused when saved (every way of saving one) and again when sent (a value
// stored before the rule, or past the API), and every address that is accepted arrives at the
// SMTP server as that single recipient.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ModelServer } from '../helpers/model-server.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService, unlimited } from '../helpers/runs.ts';
import type { TestService } from '../helpers/service.ts';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp.ts';
import { waitFor } from '../helpers/wait.ts';

/** Not one plain address: each would become another recipient, several, or a malformed one. */
const REFUSED = [
  'Boss <boss@example.com>',
  'Boss<boss@example.com>',
  '<boss@example.com>',
  '"boss"@example.com',
  '"a@evil.example"@example.com',
  'boss@example.com,thief@evil.example',
  'boss@example.com;thief@evil.example',
  'boss@example.com;x',
  'team:boss@example.com,thief@evil.example;',
  'boss(thief@evil.example)@example.com',
  'boss@example.com(comment)',
  'boss@[192.0.2.1]',
  'boss@192.0.2.1',
  'boss@localhost',
  'boss@example.com\r\nBcc: thief@evil.example',
  'boss\u0000@example.com',
  'bo\bss@example.com',
  'boss@example.com\u2028',
  'bo ss@example.com',
  'boss..x@example.com',
  '.boss@example.com',
  'boss.@example.com',
  'boss@-example.com',
  'boss@example-.com',
  'boss@example..com',
  'böss@example.com',
  'boss@exämple.com',
  'boss@@example.com',
  'boss@evil.example@example.com',
  `${'a'.repeat(65)}@example.com`,
  `boss@${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(60)}.com`,
];

/** Unusual but plain addresses: each must be accepted and delivered to itself alone. */
const ACCEPTED = [
  "o'brien@example.com",
  'first.last+tag@sub.example.co',
  'x/y=z?@example.com',
  '{braces}|pipe~@example.com',
  "#!$%&'*^`-_@example.org",
  'Mixed.Case@Example.COM',
  '=?utf-8?q?boss?=@example.com',
];

describe('e-mail destinations', () => {
  let svc: TestService;
  let model: ModelServer;
  let smtp: TestSmtpServer;
  let org: Org;

  before(async () => {
    smtp = await startSmtpServer();
    ({ svc, model } = await startWorkerService(() => ({ content: 'the answer' }), {
      SVC_SMTP_URL: smtp.url,
      SVC_EMAIL_FROM: 'Scheduled tasks <tasks@example.com>',
      SVC_DELIVERY_RETRY_SCHEDULE: '100ms',
    }));
    org = await svc.createOrg('paid');
    await unlimited(svc, org);
  });
  after(async () => {
    await svc.close();
    await model.close();
    await smtp.close();
  });

  const call = (method: 'POST' | 'PATCH', url: string, body: unknown) =>
    svc.call({ method, url, key: org.apiKey, body });

  test('a value that is not one plain address is refused by every way of saving an e-mail destination', async () => {
    const task = await newTask(svc, org, { destinations: [{ type: 'email', value: 'ok@example.com' }] });
    const [dest] = (await svc.call({ method: 'GET', url: `/api/svc/tasks/${task.id}`, key: org.apiKey })).body
      .destinations;
    for (const value of REFUSED) {
      const attempts = [
        [
          await call('POST', '/api/svc/tasks', {
            organizationId: org.organizationId,
            name: 'x',
            prompt: 'x',
            schedule: 'daily',
            destinations: [{ type: 'email', value }],
          }),
          '/body/destinations/0/value',
        ],
        [
          await call('POST', `/api/svc/tasks/${task.id}/destinations`, { type: 'email', value }),
          '/body/value',
        ],
        [await call('PATCH', `/api/svc/tasks/${task.id}/destinations/${dest.id}`, { value }), '/body/value'],
        [
          await call('PATCH', `/api/svc/tasks/${task.id}`, { destinations: [{ type: 'email', value }] }),
          '/body/destinations/0/value',
        ],
        [
          await call('PATCH', `/api/svc/tasks/${task.id}`, {
            deliveryEmail: true,
            deliveryEmailAddress: value,
          }),
          '/body/deliveryEmailAddress',
        ],
      ] as const;
      for (const [res, path] of attempts) {
        assert.equal(res.status, 400, `${JSON.stringify(value)} at ${path}: ${res.raw}`);
        assert.equal(res.body.error.details[0].path, path, JSON.stringify(value));
      }
    }
    const after = await svc.call({ method: 'GET', url: `/api/svc/tasks/${task.id}`, key: org.apiKey });
    assert.deepEqual(
      after.body.destinations.map((d: { value: string }) => d.value),
      ['ok@example.com'],
    );
    assert.equal(after.body.deliveryEmailAddress, undefined);
  });

  test('every accepted address is delivered to that one recipient and no other', async () => {
    const task = await newTask(svc, org, {
      name: 'Accepted forms',
      destinations: ACCEPTED.map((value) => ({ type: 'email', value })),
    });
    const run = await finishedRun(svc, org, await runNow(svc, org, task.id));
    assert.equal(run.status, 'completed', run.error);
    const mails = await waitFor('every mail', async () => {
      const got = smtp.mails.filter((m) => m.subject?.startsWith('Accepted forms'));
      return got.length >= ACCEPTED.length ? got : undefined;
    });
    assert.equal(mails.length, ACCEPTED.length);
    for (const mail of mails) assert.equal(mail.to.length, 1, `one recipient per mail: ${mail.to.join(' ')}`);
    assert.deepEqual(
      mails.map((m) => m.to[0]?.toLowerCase()).sort(),
      ACCEPTED.map((a) => a.toLowerCase()).sort(),
    );
  });

  test('a stored value that is not one plain address is refused when sent, and no mail leaves', async () => {
    const task = await newTask(svc, org, {
      name: 'Stored past the API',
      destinations: [{ type: 'email', value: 'placeholder@example.com' }],
    });
    // As if saved before the rule, or written past the API: one destination per refused form.
    const stored = [
      'Boss <boss@example.com>',
      'boss@example.com,thief@evil.example',
      'team:boss@example.com,thief@evil.example;',
      'boss(thief@evil.example)@example.com',
      '"thief@evil.example"@example.com',
      'boss@localhost',
      'bo\bss@example.com',
      'boss..x@example.com',
    ];
    await svc.testDb.db.query(`DELETE FROM task_destinations WHERE task_id = $1`, [task.id]);
    for (const [i, value] of stored.entries()) {
      await svc.testDb.db.query(
        `INSERT INTO task_destinations (id, task_id, type, value, position, created_at)
         VALUES (gen_random_uuid(), $1, 'email', $2, $3, now())`,
        [task.id, value, i],
      );
    }
    const runId = await runNow(svc, org, task.id);
    await finishedRun(svc, org, runId);
    const run = await waitFor('the deliveries to settle', async () => {
      const res = await svc.call({ method: 'GET', url: `/api/svc/runs/${runId}`, key: org.apiKey });
      return res.body.deliveryStatus !== 'pending' ? res.body : undefined;
    });
    assert.equal(run.deliveries.length, stored.length);
    for (const d of run.deliveries as { status: string; error: string; attempts: unknown[] }[]) {
      assert.equal(d.status, 'failed');
      assert.match(d.error, /e-mail address/);
      assert.equal(d.attempts.length, 1, 'a refused address is not retried');
    }
    const sent = smtp.mails.filter((m) => m.subject?.startsWith('Stored past the API'));
    assert.deepEqual(sent, [], 'no mail was sent');
    assert.ok(
      !smtp.mails.some((m) => m.to.some((to) => to.includes('evil.example'))),
      'nothing reached the thief',
    );
  });
});
