// Billing through the real `stripe` SDK against a local server that speaks Stripe's wire
// format; webhook events signed with the SDK's own test-header helper.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import Stripe from 'stripe';
import type { ModelServer } from './helpers/model-server.ts';
import { finishedRun, newTask, type Org, runNow, startWorkerService } from './helpers/runs.ts';
import { startTestService, type TestService } from './helpers/service.ts';
import { type StripeTestServer, startStripeServer } from './helpers/stripe-server.ts';
import { waitFor } from './helpers/wait.ts';

const WEBHOOK_SECRET = 'whsec_test_billing_secret_0123456789';
const STRIPE_KEY = 'sk_test_billing_0123456789';

function stripeEnv(stripe: StripeTestServer): Record<string, string> {
  return {
    STRIPE_SECRET_KEY: STRIPE_KEY,
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    STRIPE_PRICE_ID: 'price_paid_monthly',
    SVC_STRIPE_API_BASE: stripe.url,
    SVC_PUBLIC_URL: 'https://tasks.example.com',
  };
}

let eventCounter = 0;
/** A Stripe event as Stripe sends it, `created` seconds given. */
function event(
  type: string,
  object: Record<string, unknown>,
  created: number,
  id = `evt_${++eventCounter}_${randomUUID().slice(0, 8)}`,
) {
  return {
    id,
    object: 'event',
    type,
    created,
    livemode: false,
    api_version: Stripe.API_VERSION,
    data: { object },
  };
}

async function sendEvent(
  svc: TestService,
  body: object,
  options: { secret?: string; timestamp?: number } = {},
) {
  const payload = JSON.stringify(body);
  const signature = Stripe.webhooks.generateTestHeaderString({
    payload,
    secret: options.secret ?? WEBHOOK_SECRET,
    ...(options.timestamp !== undefined && { timestamp: options.timestamp }),
  });
  return svc.call({
    method: 'POST',
    url: '/api/svc/billing/webhook',
    body: payload,
    headers: { 'content-type': 'application/json', 'stripe-signature': signature },
  });
}

const status = async (svc: TestService, org: Org) =>
  (
    await svc.call({
      method: 'GET',
      url: `/api/svc/billing/status?organizationId=${org.organizationId}`,
      key: org.apiKey,
    })
  ).body;
const post = (svc: TestService, org: Org, path: 'checkout' | 'portal') =>
  svc.call({
    method: 'POST',
    url: `/api/svc/billing/${path}`,
    key: org.apiKey,
    body: { organizationId: org.organizationId },
  });
const subscription = (org: Org, customer: string, status: string, id = 'sub_1') => ({
  id,
  object: 'subscription',
  customer,
  status,
  metadata: { organizationId: org.organizationId },
});
const now = () => Math.floor(Date.now() / 1000);

test('without STRIPE_SECRET_KEY, checkout and portal answer 503 billing_not_configured; the status still works', async () => {
  const svc = await startTestService();
  try {
    const org = await svc.createOrg();
    for (const path of ['checkout', 'portal'] as const) {
      const res = await post(svc, org, path);
      assert.equal(res.status, 503, res.raw);
      assert.equal(res.body.error.code, 'billing_not_configured');
    }
    assert.equal((await status(svc, org)).plan, 'free');
  } finally {
    await svc.close();
  }
});

describe('billing with Stripe', () => {
  let stripe: StripeTestServer;
  let svc: TestService;
  before(async () => {
    stripe = await startStripeServer();
    svc = await startTestService({ env: stripeEnv(stripe) });
  });
  after(async () => {
    await svc.close();
    await stripe.close();
  });

  test('checkout creates the customer once, then a subscription session with the configured price', async () => {
    const org = await svc.createOrg();
    const first = await post(svc, org, 'checkout');
    assert.equal(first.status, 200, first.raw);
    assert.match(first.body.url, /^https:\/\/checkout\.stripe\.com\//);
    const second = await post(svc, org, 'checkout');
    assert.equal(second.status, 200);

    const mine = (path: string) =>
      stripe.requests.filter((r) => r.path === path && JSON.stringify(r.form).includes(org.organizationId));
    const customers = mine('/v1/customers');
    assert.equal(customers.length, 1, 'the customer is created once');
    assert.equal(customers[0]?.idempotencyKey, `customer-${org.organizationId}`);
    assert.equal(customers[0]?.authorization, `Bearer ${STRIPE_KEY}`);
    const sessions = mine('/v1/checkout/sessions');
    assert.equal(sessions.length, 2);
    const [session] = sessions;
    assert.ok(session);
    const billing = await status(svc, org);
    assert.match(billing.paymentCustomerId, /^cus_/);
    assert.deepEqual(
      {
        mode: session.form.mode,
        customer: session.form.customer,
        client_reference_id: session.form.client_reference_id,
        line_items: session.form.line_items,
        success_url: session.form.success_url,
        cancel_url: session.form.cancel_url,
      },
      {
        mode: 'subscription',
        customer: billing.paymentCustomerId,
        client_reference_id: org.organizationId,
        line_items: [{ price: 'price_paid_monthly', quantity: '1' }],
        success_url:
          'https://tasks.example.com/dashboard/billing?checkout=success&session_id={CHECKOUT_SESSION_ID}',
        cancel_url: 'https://tasks.example.com/dashboard/billing?checkout=cancelled',
      },
    );
    assert.match(session.idempotencyKey ?? '', new RegExp(`^checkout-${org.organizationId}-`));
    assert.notEqual(
      sessions[0]?.idempotencyKey,
      sessions[1]?.idempotencyKey,
      'each checkout is its own request',
    );
  });

  test('the portal needs a customer (409 before), then answers a portal session returning to the service', async () => {
    const org = await svc.createOrg();
    const before = await post(svc, org, 'portal');
    assert.equal(before.status, 409, before.raw);
    assert.equal(before.body.error.code, 'conflict');
    await post(svc, org, 'checkout');
    const portal = await post(svc, org, 'portal');
    assert.equal(portal.status, 200, portal.raw);
    assert.match(portal.body.url, /^https:\/\/billing\.stripe\.com\//);
    const request = stripe.requests.filter((r) => r.path === '/v1/billing_portal/sessions').at(-1);
    assert.equal(request?.form.customer, (await status(svc, org)).paymentCustomerId);
    assert.equal(request?.form.return_url, 'https://tasks.example.com/dashboard/billing');
  });

  test('a Stripe outage is a 503 with Retry-After, and a refused price a 503 billing_not_configured', async () => {
    const org = await svc.createOrg();
    stripe.fail('/v1/customers', 500, { type: 'api_error', message: 'Something went wrong' });
    const outage = await post(svc, org, 'checkout');
    assert.equal(outage.status, 503, outage.raw);
    assert.equal(outage.body.error.code, 'service_unavailable');
    assert.ok(outage.headers['retry-after']);
    stripe.fail('/v1/checkout/sessions', 400, {
      type: 'invalid_request_error',
      message: 'No such price: price_paid_monthly',
      code: 'resource_missing',
    });
    const refused = await post(svc, org, 'checkout');
    assert.equal(refused.status, 503);
    assert.equal(refused.body.error.code, 'billing_not_configured');
    assert.match(refused.body.error.message, /No such price/);
  });

  test("a Stripe outage's log line carries the error it wraps as its cause, and the answer does not", async () => {
    const org = await svc.createOrg();
    stripe.fail('/v1/customers', 500, { type: 'api_error', message: 'Cause marker 7f3e' });
    const outage = await post(svc, org, 'checkout');
    assert.equal(outage.status, 503, outage.raw);
    assert.ok(!outage.raw.includes('Cause marker 7f3e'), outage.raw);
    // The error handler's line for this request (a chunk of the log may hold several lines).
    const reqId = `"reqId":"${outage.headers['x-request-id']}"`;
    const line = svc.logs
      .flatMap((chunk) => chunk.split('\n'))
      .find((l) => l.includes(reqId) && l.includes('"msg":"request failed"'));
    assert.ok(line, 'the error handler logs the 503');
    assert.match(line, /caused by: .*Cause marker 7f3e/);
  });

  test('signed webhooks move the plan; bad signatures and stale timestamps are 400s; duplicates change nothing', async () => {
    const org = await svc.createOrg();
    const customer = `cus_${randomUUID().slice(0, 12)}`;
    const created = event('customer.subscription.created', subscription(org, customer, 'active'), now() - 60);
    assert.equal((await sendEvent(svc, created)).status, 200);
    let billing = await status(svc, org);
    assert.equal(billing.plan, 'paid');
    assert.equal(billing.paymentSubscriptionId, 'sub_1');
    assert.equal(billing.paymentCustomerId, customer);

    const deleted = event(
      'customer.subscription.deleted',
      subscription(org, customer, 'canceled'),
      now() - 30,
    );
    const forged = await sendEvent(svc, deleted, { secret: 'whsec_not_the_secret' });
    assert.equal(forged.status, 400, forged.raw);
    assert.equal(forged.body.error.code, 'validation_error');
    const stale = await sendEvent(svc, deleted, { timestamp: now() - 3600 });
    assert.equal(stale.status, 400);
    assert.match(stale.body.error.message, /tolerance/i);
    assert.equal((await status(svc, org)).plan, 'paid', 'refused events changed nothing');

    assert.equal((await sendEvent(svc, deleted)).status, 200);
    assert.equal((await status(svc, org)).plan, 'free');
    // Stripe redelivers the first event: already applied, a no-op.
    assert.equal((await sendEvent(svc, created)).status, 200);
    billing = await status(svc, org);
    assert.equal(billing.plan, 'free');
  });

  test('events arriving out of order end in the state of the newest one', async () => {
    const org = await svc.createOrg();
    const customer = `cus_${randomUUID().slice(0, 12)}`;
    const t = now() - 600;
    const incomplete = event(
      'customer.subscription.created',
      subscription(org, customer, 'incomplete', 'sub_9'),
      t,
    );
    const active = event(
      'customer.subscription.updated',
      subscription(org, customer, 'active', 'sub_9'),
      t + 5,
    );
    assert.equal((await sendEvent(svc, active)).status, 200);
    assert.equal((await sendEvent(svc, incomplete)).status, 200);
    assert.equal((await status(svc, org)).plan, 'paid');
    // Cancelling an older subscription does not end the newer one.
    const oldCancelled = event(
      'customer.subscription.deleted',
      subscription(org, customer, 'canceled', 'sub_old'),
      t + 10,
    );
    await sendEvent(svc, oldCancelled);
    assert.equal((await status(svc, org)).plan, 'paid');
  });

  test('a paid invoice starts a new billing period with runsUsed from zero', async () => {
    const org = await svc.createOrg();
    const customer = `cus_${randomUUID().slice(0, 12)}`;
    await sendEvent(
      svc,
      event('customer.subscription.created', subscription(org, customer, 'active'), now() - 100),
    );
    const task = await newTask(svc, org);
    await runNow(svc, org, task.id);
    assert.equal((await status(svc, org)).runsUsed, 1);
    // The next whole second: after the run above was created.
    const periodStart = Math.ceil(Date.now() / 1000);
    const invoice = {
      id: 'in_1',
      object: 'invoice',
      customer,
      status: 'paid',
      period_start: periodStart - 86_400 * 30,
      period_end: periodStart,
      lines: {
        object: 'list',
        data: [{ id: 'il_1', period: { start: periodStart, end: periodStart + 86_400 * 30 } }],
      },
    };
    assert.equal((await sendEvent(svc, event('invoice.paid', invoice, now()))).status, 200);
    const billing = await waitFor('the new period to begin', async () => {
      const s = await status(svc, org);
      return Date.parse(s.billingPeriodStart) === periodStart * 1000 && Date.now() >= periodStart * 1000
        ? s
        : undefined;
    });
    assert.equal(billing.runsUsed, 0);
  });
});

describe('plan limits', () => {
  let stripe: StripeTestServer;
  let svc: TestService;
  let model: ModelServer;
  before(async () => {
    stripe = await startStripeServer();
    ({ svc, model } = await startWorkerService(
      (prompt) =>
        prompt.startsWith('expensive')
          ? { usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20, cost: 25 } }
          : prompt.startsWith('cheap')
            ? { usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20, cost: 1.004 } }
            : {},
      stripeEnv(stripe),
    ));
  });
  after(async () => {
    await svc.close();
    await model.close();
    await stripe.close();
  });

  test('the task beyond tasksLimit and the run beyond runsLimit are refused until an upgrade lifts both', async () => {
    const org = await svc.createOrg('free');
    const tasks = [];
    for (let i = 0; i < 5; i++) tasks.push(await newTask(svc, org));
    const sixthTask = () =>
      svc.call({
        method: 'POST',
        url: '/api/svc/tasks',
        key: org.apiKey,
        body: { organizationId: org.organizationId, name: 'Sixth', prompt: 'x', schedule: 'daily' },
      });
    const sixth = await sixthTask();
    assert.equal(sixth.status, 403, sixth.raw);
    assert.equal(sixth.body.error.code, 'plan_limit_exceeded');

    // The period has seen 199 runs already (ledger rows, as runs leave them): one more is allowed.
    const [first] = tasks;
    assert.ok(first);
    await svc.service.deps.db.query(
      `INSERT INTO usage_ledger (run_id, organization_id, task_id, status, created_at)
       SELECT gen_random_uuid(), $1, $2, 'completed', now() FROM generate_series(1, 199)`,
      [org.organizationId, first.id],
    );
    const allowed = await finishedRun(svc, org, await runNow(svc, org, first.id));
    assert.equal(allowed.status, 'completed');
    // At the limit no run is created: run now answers 403 and nothing runs or counts.
    const refused = await svc.call({
      method: 'POST',
      url: `/api/svc/tasks/${first.id}/run`,
      key: org.apiKey,
    });
    assert.equal(refused.status, 403, refused.raw);
    assert.equal(refused.body.error.code, 'plan_limit_exceeded');
    assert.match(refused.body.error.message, /limit of 200 runs per billing period was reached/);
    assert.equal((await status(svc, org)).runsUsed, 200);

    const customer = `cus_${randomUUID().slice(0, 12)}`;
    await sendEvent(
      svc,
      event('customer.subscription.created', subscription(org, customer, 'active'), now()),
    );
    assert.equal((await status(svc, org)).plan, 'paid');
    const lifted = await sixthTask();
    assert.equal(lifted.status, 201, lifted.raw);
    const after = await finishedRun(svc, org, await runNow(svc, org, lifted.body.id));
    assert.equal(after.status, 'completed');
  });

  test('on the paid plan, usage beyond the credits is reported to Stripe once as meter events', async () => {
    const org = await svc.createOrg('paid');
    await post(svc, org, 'checkout'); // creates the Stripe customer
    const customer = (await status(svc, org)).paymentCustomerId;
    const cheap = await finishedRun(
      svc,
      org,
      await runNow(svc, org, (await newTask(svc, org, { prompt: 'cheap one' })).id),
    );
    assert.equal(cheap.status, 'completed');
    const pricey = await finishedRun(
      svc,
      org,
      await runNow(svc, org, (await newTask(svc, org, { prompt: 'expensive one' })).id),
    );
    assert.equal(pricey.status, 'completed');
    // 100.4 + 2500 cents, 2000 included: 600 cents beyond, in whole cents.
    const billing = await status(svc, org);
    assert.ok(Math.abs(billing.usageCostCents - 600.4) < 1e-6, String(billing.usageCostCents));
    const events = await waitFor('the meter event', async () => {
      const mine = [...stripe.meterEvents.values()].filter(
        (e) => (e.payload as { stripe_customer_id: string }).stripe_customer_id === customer,
      );
      return mine.length ? mine : undefined;
    });
    assert.deepEqual(
      events.map((e) => [e.event_name, (e.payload as { value: string }).value]),
      [['svc_usage_cents', '600']],
    );

    // A crash after sending, before it was marked: the report goes again and Stripe refuses
    // the known identifier; it is then marked sent, and counted once. The reporter that sent it
    // has settled it (and let go of its lease) before the crash is staged, and its loop is
    // stopped first: a pass of it still going after that settle would take the staged report
    // itself, and the send below would find it leased.
    const { db } = svc.service.deps;
    await waitFor('the report marked sent', async () => {
      const [sent] = await db.query<{ unsent: number }>(
        'SELECT count(*)::int AS unsent FROM meter_reports WHERE organization_id = $1 AND sent_at IS NULL',
        [org.organizationId],
      );
      return sent?.unsent === 0 ? true : undefined;
    });
    await svc.service.usageReporter?.stop();
    await db.query('UPDATE meter_reports SET sent_at = NULL WHERE organization_id = $1', [
      org.organizationId,
    ]);
    assert.equal(await svc.service.usageReporter?.sendDue(), 0);
    const [row] = await db.query<{ unsent: number }>(
      'SELECT count(*)::int AS unsent FROM meter_reports WHERE organization_id = $1 AND sent_at IS NULL',
      [org.organizationId],
    );
    assert.equal(row?.unsent, 0);
    assert.equal(
      [...stripe.meterEvents.values()].filter(
        (e) => (e.payload as { stripe_customer_id: string }).stripe_customer_id === customer,
      ).length,
      1,
    );
  });
});
