import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import type { DeliveryMessage } from '../src/delivery/channel.ts';
import { emailChannel } from '../src/delivery/channels/email.ts';
import { smsChannel } from '../src/delivery/channels/sms.ts';
import { webhookChannel } from '../src/delivery/channels/webhook.ts';
import { htmlOf, plainTextOf, smsTextOf, subjectOf } from '../src/delivery/content.ts';
import { outboundFetch } from '../src/lib/outbound.ts';
import { startSmsServer } from './helpers/sms-server.ts';
import { startSmtpServer } from './helpers/smtp.ts';
import { startWebhookReceiver } from './helpers/webhook-receiver.ts';

function message(
  overrides: Partial<DeliveryMessage> & { run?: DeliveryMessage['run'] } = {},
): DeliveryMessage {
  const taskId = randomUUID();
  return {
    run: {
      id: randomUUID(),
      taskId,
      status: 'completed',
      output: '# Daily summary\n\nAll **systems** nominal.',
      costCents: 1.25,
      tokensUsed: 1234,
      durationMs: 5200,
      createdAt: '2030-01-02T03:04:00.000Z',
      startedAt: '2030-01-02T03:04:01.000Z',
      completedAt: '2030-01-02T03:04:06.200Z',
    },
    task: { id: taskId, name: 'Morning report' },
    organizationId: randomUUID(),
    deliveryId: randomUUID(),
    occurredAt: new Date('2030-01-02T03:04:06.200Z'),
    runUrl: 'https://svc.example.test/runs/abc',
    ...overrides,
  };
}

const failedRun = (error: string) => ({ id: randomUUID(), status: 'failed' as const, error });
const never = new AbortController().signal;
const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

describe('delivery content', () => {
  test('the subject is the task name and the outcome, on one line and cut when long', () => {
    assert.equal(subjectOf(message()), 'Morning report: completed');
    assert.equal(subjectOf(message({ run: failedRun('boom') })), 'Morning report: failed');
    const long = subjectOf(
      message({ task: { id: randomUUID(), name: `Line one\nline two ${'x'.repeat(300)}` } }),
    );
    assert.ok(!long.includes('\n'));
    assert.ok(long.startsWith('Line one line two'));
    assert.ok(long.endsWith('…: completed'));
    assert.ok(long.length <= 150 + ': completed'.length);
  });

  test('the plain text has the output, the run link and a footer with id, cost, tokens and duration', () => {
    const m = message();
    const text = plainTextOf(m);
    assert.ok(text.startsWith('# Daily summary\n\nAll **systems** nominal.\n'));
    assert.ok(text.includes('View the run: https://svc.example.test/runs/abc'));
    assert.ok(text.includes(`Run ${m.run.id}`));
    assert.ok(text.includes('$0.0125'));
    assert.ok(text.includes('1234 tokens'));
    assert.ok(text.includes('5.2 s'));
  });

  test('the plain text of a failed run gives the error, and no link line when there is no public URL', () => {
    const text = plainTextOf(message({ run: failedRun('the model timed out'), runUrl: undefined }));
    assert.ok(text.startsWith('The run failed: the model timed out'));
    assert.ok(!text.includes('View the run'));
  });

  test('the HTML renders the Markdown output under the subject with the run link', () => {
    const html = htmlOf(message());
    assert.ok(html.includes('<h1>Daily summary</h1>'));
    assert.ok(html.includes('<strong>systems</strong>'));
    assert.match(html, /<h1 [^>]*>Morning report: completed<\/h1>/);
    assert.match(html, /<a href="https:\/\/svc\.example\.test\/runs\/abc"[^>]*>View the run<\/a>/);
  });

  test('raw HTML in the output arrives as escaped text, never as markup', () => {
    const html = htmlOf(
      message({
        run: { status: 'completed', output: 'Hi <script>alert(1)</script> and <img src=x onerror=alert(1)>' },
      }),
    );
    assert.ok(!html.includes('<script'));
    assert.ok(!html.includes('<img'));
    assert.ok(html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(html.includes('&lt;img src=x onerror=alert(1)&gt;'));
  });

  test('a javascript: link in the output is not a link', () => {
    const html = htmlOf(message({ run: { status: 'completed', output: 'click [x](javascript:alert(1))' } }));
    assert.ok(!/href="javascript:/i.test(html));
    assert.ok(html.includes('[x](javascript:alert(1))'));
  });

  test('an image in the output is a link in the e-mail, so opening the e-mail loads nothing', () => {
    const output =
      'Summary ![chart](https://tracker.example/p.png?d=secret) and [![logo](https://x.example/l.png)](https://x.example)';
    const html = htmlOf(message({ run: { status: 'completed', output } }));
    assert.ok(!/<img/i.test(html), html);
    assert.match(html, /<a href="https:\/\/tracker\.example\/p\.png\?d=secret"[^>]*>Image: chart<\/a>/);
    assert.match(html, /<a href="https:\/\/x\.example"[^>]*>Image: logo<\/a>/);
  });

  test('the HTML of a failed run shows the error escaped', () => {
    const html = htmlOf(message({ run: failedRun('<b>bad</b> gateway') }));
    assert.ok(html.includes('The run failed: &lt;b&gt;bad&lt;/b&gt; gateway'));
  });

  test('the SMS text is one line, cut with an ellipsis so that it and the link fit the limit', () => {
    const m = message({ run: { status: 'completed', output: `Line\n\n  one ${'word '.repeat(200)}` } });
    const sms = smsTextOf(m, 160);
    assert.ok(sms.length <= 160);
    assert.ok(sms.startsWith('Morning report: Line one word'));
    assert.ok(sms.endsWith(`… ${m.runUrl}`));
    assert.ok(!sms.includes('\n'));
    assert.equal(
      smsTextOf(message({ runUrl: undefined }), 320),
      'Morning report: # Daily summary All **systems** nominal.',
    );
  });
});

describe('e-mail channel', async () => {
  const smtp = await startSmtpServer({ rejectRecipient: (a) => a.startsWith('nobody@') });
  const busy = await startSmtpServer({ rejectRecipient: () => true, rejectCode: 451 });
  const locked = await startSmtpServer({ auth: { user: 'svc', pass: 'hunter2-secret' } });
  after(() => Promise.all([smtp.close(), busy.close(), locked.close()]));
  const from = 'Svc <noreply@example.test>';

  test('a run is mailed to the recipient with the subject and the output in the text and HTML bodies', async () => {
    const channel = emailChannel({ url: smtp.url, from });
    const m = message();
    const outcome = await channel.send('ada@example.test', m, never);
    assert.equal(outcome.ok, true, JSON.stringify(outcome));
    const mail = smtp.mails.at(-1)!;
    assert.deepEqual(mail.to, ['ada@example.test']);
    assert.equal(mail.from, 'noreply@example.test');
    assert.equal(mail.subject, 'Morning report: completed');
    assert.ok(mail.text?.includes('All **systems** nominal.'));
    assert.ok(mail.text?.includes('View the run: https://svc.example.test/runs/abc'));
    assert.ok(mail.html?.includes('<strong>systems</strong>'));
    assert.equal(mail.headers['auto-submitted'], 'auto-generated');
  });

  test('a non-ASCII task name and output arrive intact (encoded subject, quoted-printable bodies)', async () => {
    const m = message({
      task: { id: randomUUID(), name: 'Rapport du matin — été ✓' },
      run: { id: randomUUID(), status: 'completed', output: `Café ✓ 日本語 ${'long line '.repeat(20)}` },
    });
    const outcome = await emailChannel({ url: smtp.url, from }).send('ada@example.test', m, never);
    assert.equal(outcome.ok, true, JSON.stringify(outcome));
    const mail = smtp.mails.at(-1)!;
    assert.equal(mail.subject, 'Rapport du matin — été ✓: completed');
    assert.ok(mail.text?.startsWith(`Café ✓ 日本語 ${'long line '.repeat(19)}long line\n`));
    assert.ok(mail.html?.includes('<p>Café ✓ 日本語 long line'));
  });

  test('the Message-ID comes from the delivery id, the same on a repeated attempt', async () => {
    const channel = emailChannel({ url: smtp.url, from });
    const m = message();
    await channel.send('ada@example.test', m, never);
    await channel.send('ada@example.test', m, never);
    const [first, second] = smtp.mails.slice(-2);
    assert.equal(first?.headers['message-id'], `<${m.deliveryId}@example.test>`);
    assert.equal(second?.headers['message-id'], first?.headers['message-id']);
  });

  test('without SMTP settings the failure is permanent and names the variables to set', async () => {
    const outcome = await emailChannel({ url: undefined, from: undefined }).send(
      'a@example.test',
      message(),
      never,
    );
    assert.equal(outcome.ok, false);
    assert.ok(!outcome.ok && outcome.permanent);
    assert.ok(
      !outcome.ok && outcome.error.includes('SVC_SMTP_URL') && outcome.error.includes('SVC_EMAIL_FROM'),
    );
  });

  test('a recipient the server rejects with 550 is a permanent failure with the server response', async () => {
    const outcome = await emailChannel({ url: smtp.url, from }).send('nobody@example.test', message(), never);
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, true);
    assert.equal(outcome.statusCode, 550);
    assert.ok(outcome.response?.includes('No such user here'));
  });

  test('a temporary refusal (451) is retried', async () => {
    const outcome = await emailChannel({ url: busy.url, from }).send('ada@example.test', message(), never);
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, false);
    assert.equal(outcome.statusCode, 451);
  });

  test('a wrong SMTP password fails without the password in the error', async () => {
    const url = locked.url.replace('smtp://', 'smtp://svc:wrong-pass%21word@');
    const outcome = await emailChannel({ url, from }).send('ada@example.test', message(), never);
    assert.ok(!outcome.ok);
    assert.ok(!JSON.stringify(outcome).includes('wrong-pass'), JSON.stringify(outcome));
    const ok = await emailChannel({
      url: locked.url.replace('smtp://', 'smtp://svc:hunter2-secret@'),
      from,
    }).send('ada@example.test', message(), never);
    assert.equal(ok.ok, true, JSON.stringify(ok));
  });

  test('an address that is not one plain address is refused for good', async () => {
    const outcome = await emailChannel({ url: smtp.url, from }).send(
      'a@example.test, b@example.test',
      message(),
      never,
    );
    assert.ok(!outcome.ok && outcome.permanent);
  });
});

describe('SMS channel', async () => {
  const provider = await startSmsServer([
    {},
    {
      status: 400,
      body: { code: 21211, message: "The 'To' number is not a valid phone number.", status: 400 },
    },
    { status: 500, body: 'oops' },
    { status: 429, headers: { 'retry-after': '3' }, body: { code: 20429, message: 'Too Many Requests' } },
  ]);
  after(() => provider.close());
  const config = {
    apiBase: provider.url,
    accountSid: 'AC123',
    authToken: 'tok-secret',
    from: '+15005550006',
  };
  const channel = smsChannel(config, globalThis.fetch);

  // The scripted replies answer in order: the tests of this block run in order.
  test('a run is posted as Twilio expects: form fields, Basic auth, the account path', async () => {
    const m = message();
    const outcome = await channel.send('+14155550123', m, never);
    assert.deepEqual(outcome, { ok: true, statusCode: 201, response: `SM${'0'.repeat(32)}` });
    const request = provider.requests[0]!;
    assert.equal(request.method, 'POST');
    assert.equal(request.path, '/2010-04-01/Accounts/AC123/Messages.json');
    assert.equal(request.authorization, `Basic ${Buffer.from('AC123:tok-secret').toString('base64')}`);
    assert.equal(request.contentType, 'application/x-www-form-urlencoded');
    assert.deepEqual(request.form, { To: '+14155550123', From: '+15005550006', Body: smsTextOf(m) });
  });

  test("a 400 is permanent and carries the provider's message", async () => {
    const outcome = await channel.send('+14155550123', message(), never);
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, true);
    assert.equal(outcome.statusCode, 400);
    assert.ok(outcome.error.includes("The 'To' number is not a valid phone number."));
    assert.ok(!JSON.stringify(outcome).includes('tok-secret'));
  });

  test('a 500 is retried', async () => {
    const outcome = await channel.send('+14155550123', message(), never);
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, false);
    assert.equal(outcome.statusCode, 500);
  });

  test('a 429 is retried after the Retry-After the provider asks for', async () => {
    const outcome = await channel.send('+14155550123', message(), never);
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, false);
    assert.equal(outcome.retryAfterMs, 3000);
  });

  test('a number not in E.164 form is refused for good without calling the provider', async () => {
    const before = provider.requests.length;
    const outcome = await channel.send('0612345678', message(), never);
    assert.ok(!outcome.ok && outcome.permanent && outcome.error.includes('E.164'));
    assert.equal(provider.requests.length, before);
  });

  test('without SMS settings the failure is permanent and names the missing variables', async () => {
    const unconfigured = smsChannel({ ...config, authToken: undefined, from: undefined }, globalThis.fetch);
    const outcome = await unconfigured.send('+14155550123', message(), never);
    assert.ok(!outcome.ok && outcome.permanent);
    assert.ok(
      !outcome.ok && outcome.error.includes('SVC_SMS_AUTH_TOKEN') && outcome.error.includes('SVC_SMS_FROM'),
    );
    assert.ok(!outcome.ok && !outcome.error.includes('SVC_SMS_API_BASE'));
  });
});

describe('webhook channel', () => {
  const open = outboundFetch({ allowPrivateUrls: true });
  const secret = newSecret();
  const secretOf = async () => secret;

  test('the receiver verifies the Standard Webhooks signature, and the body is exactly the run and task', async () => {
    const receiver = await startWebhookReceiver();
    after(() => receiver.close());
    const m = message();
    const outcome = await webhookChannel({ fetch: open, secretOf }).send(receiver.url, m, never);
    assert.deepEqual(outcome, { ok: true, statusCode: 200, response: 'ok' });
    const request = receiver.requests[0]!;
    assert.equal(request.headers['content-type'], 'application/json');
    assert.equal(request.headers['user-agent'], 'svc-webhooks/1');
    assert.equal(request.headers['webhook-id'], m.deliveryId);
    const verified = new Webhook(secret).verify(request.body, request.headers as Record<string, string>);
    assert.deepEqual(verified, {
      type: 'run.completed',
      timestamp: '2030-01-02T03:04:06.200Z',
      data: { run: m.run, task: { id: m.task.id, name: 'Morning report' } },
    });
    assert.throws(() =>
      new Webhook(newSecret()).verify(request.body, request.headers as Record<string, string>),
    );
  });

  test('a failed run is sent as run.failed with the same webhook-id on every attempt', async () => {
    const receiver = await startWebhookReceiver([{ status: 500 }]);
    after(() => receiver.close());
    const m = message({ run: failedRun('boom') });
    const channel = webhookChannel({ fetch: open, secretOf });
    const first = await channel.send(receiver.url, m, never);
    assert.ok(!first.ok && !first.permanent && first.statusCode === 500);
    assert.equal((await channel.send(receiver.url, m, never)).ok, true);
    const [a, b] = receiver.requests;
    assert.equal(JSON.parse(a!.body).type, 'run.failed');
    assert.equal(a!.headers['webhook-id'], m.deliveryId);
    assert.equal(b!.headers['webhook-id'], m.deliveryId);
  });

  test('a redirect is a failure and is not followed', async () => {
    const elsewhere = await startWebhookReceiver();
    const receiver = await startWebhookReceiver([{ status: 302, headers: { location: elsewhere.url } }]);
    after(() => Promise.all([receiver.close(), elsewhere.close()]));
    const outcome = await webhookChannel({ fetch: open, secretOf }).send(receiver.url, message(), never);
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, false);
    assert.equal(outcome.statusCode, 302);
    assert.ok(outcome.error.includes('redirects are not followed'));
    assert.equal(elsewhere.requests.length, 0);
  });

  test('410 Gone is permanent', async () => {
    const receiver = await startWebhookReceiver([{ status: 410, body: 'gone' }]);
    after(() => receiver.close());
    const outcome = await webhookChannel({ fetch: open, secretOf }).send(receiver.url, message(), never);
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, true);
    assert.equal(outcome.response, 'gone');
  });

  test('a 429 with Retry-After: 7 asks to retry after 7 seconds', async () => {
    const receiver = await startWebhookReceiver([{ status: 429, headers: { 'retry-after': '7' } }]);
    after(() => receiver.close());
    const outcome = await webhookChannel({ fetch: open, secretOf }).send(receiver.url, message(), never);
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, false);
    assert.equal(outcome.retryAfterMs, 7000);
  });

  test('a loopback URL under the SSRF guard is refused for good and nothing is sent', async () => {
    const receiver = await startWebhookReceiver();
    after(() => receiver.close());
    const guarded = outboundFetch({ allowPrivateUrls: false });
    const outcome = await webhookChannel({ fetch: guarded, secretOf }).send(receiver.url, message(), never);
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, true);
    assert.ok(outcome.error.includes('SVC_ALLOW_PRIVATE_URLS'));
    assert.equal(receiver.requests.length, 0);
  });

  test('a receiver that never answers is a retryable timeout', async () => {
    const receiver = await startWebhookReceiver([{ hang: true }]);
    after(() => receiver.close());
    const outcome = await webhookChannel({ fetch: open, secretOf, timeoutMs: 200 }).send(
      receiver.url,
      message(),
      never,
    );
    assert.ok(!outcome.ok);
    assert.equal(outcome.permanent, false);
    assert.ok(outcome.error.includes('no answer within'), outcome.error);
  });

  test('a URL that is not http or https is refused for good', async () => {
    const outcome = await webhookChannel({ fetch: open, secretOf }).send(
      'ftp://example.test/x',
      message(),
      never,
    );
    assert.ok(!outcome.ok && outcome.permanent);
  });
});
