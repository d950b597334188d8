// The local Stripe server, driven through the real `stripe` SDK: if the SDK accepts its answers and
// raises the right error classes here, the service's Stripe code can be tested against it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Stripe from 'stripe';
import { decodeStripeForm, type StripeTestServer, startStripeServer } from './helpers/stripe-server.ts';

describe('stripe test server', () => {
  let server: StripeTestServer;
  let stripe: Stripe;
  // No SDK retries, so each call is exactly one request (fail() tests opt back in).
  const client = (key = 'sk_test_123', maxNetworkRetries = 0): Stripe =>
    new Stripe(key, { host: server.host, port: server.port, protocol: 'http', maxNetworkRetries });

  before(async () => {
    server = await startStripeServer();
    stripe = client();
  });
  after(() => server.close());

  const lastRequest = () => server.requests.at(-1)!;

  test('decodeStripeForm nests bracket notation into objects and arrays', () => {
    const body =
      'mode=subscription&line_items[0][price]=price_1&line_items[0][quantity]=1' +
      '&line_items[1][price]=price_2&line_items[1][adjustable_quantity][enabled]=true' +
      '&metadata[organizationId]=org%201&expand[]=customer&expand[]=subscription&name=A+B' +
      '&__proto__[polluted]=1';
    assert.deepEqual(decodeStripeForm(body), {
      mode: 'subscription',
      line_items: [
        { price: 'price_1', quantity: '1' },
        { price: 'price_2', adjustable_quantity: { enabled: 'true' } },
      ],
      metadata: { organizationId: 'org 1' },
      expand: ['customer', 'subscription'],
      name: 'A B',
    });
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  test('a repeated Idempotency-Key replays the first customer', async () => {
    const before = server.customers.size;
    const params = { name: 'Acme', email: 'billing@acme.test', metadata: { organizationId: 'org_1' } };
    const first = await stripe.customers.create(params, { idempotencyKey: 'customer-org_1' });
    const second = await stripe.customers.create(params, { idempotencyKey: 'customer-org_1' });

    assert.match(first.id, /^cus_[A-Za-z0-9]{14}$/);
    assert.equal(second.id, first.id);
    assert.deepEqual({ ...second, lastResponse: undefined }, { ...first, lastResponse: undefined });
    assert.equal(first.lastResponse.headers['idempotent-replayed'], undefined);
    assert.equal(second.lastResponse.headers['idempotent-replayed'], 'true');
    assert.equal(server.customers.size, before + 1);
    assert.deepEqual(server.customers.get(first.id)?.metadata, { organizationId: 'org_1' });

    const request = lastRequest();
    assert.equal(request.authorization, 'Bearer sk_test_123');
    assert.equal(request.idempotencyKey, 'customer-org_1');
    assert.equal(request.stripeVersion, Stripe.API_VERSION);
  });

  test('the same Idempotency-Key with other parameters is an idempotency error', async () => {
    await stripe.customers.create({ name: 'One' }, { idempotencyKey: 'reused-key' });
    await assert.rejects(
      stripe.customers.create({ name: 'Two' }, { idempotencyKey: 'reused-key' }),
      (e) => e instanceof Stripe.errors.StripeIdempotencyError && /same parameters/.test(e.message),
    );
  });

  test('without an idempotencyKey option the SDK still sends one of its own', async () => {
    await stripe.customers.create({ name: 'Auto' });
    assert.match(lastRequest().idempotencyKey ?? '', /^stripe-node-retry-[0-9a-f-]{36}$/);
  });

  test('checkout session: line items and metadata arrive decoded', async () => {
    const customer = await stripe.customers.create({ name: 'Checkout Co' });
    const session = await stripe.checkout.sessions.create({
      mode: 'subscription',
      customer: customer.id,
      client_reference_id: 'org_42',
      line_items: [{ price: 'price_pro', quantity: 1 }],
      success_url: 'https://app.test/billing?ok=1',
      cancel_url: 'https://app.test/billing',
      metadata: { organizationId: 'org_42' },
    });

    assert.deepEqual(lastRequest().form, {
      mode: 'subscription',
      customer: customer.id,
      client_reference_id: 'org_42',
      line_items: [{ price: 'price_pro', quantity: '1' }],
      success_url: 'https://app.test/billing?ok=1',
      cancel_url: 'https://app.test/billing',
      metadata: { organizationId: 'org_42' },
    });
    assert.match(session.id, /^cs_test_/);
    assert.equal(session.object, 'checkout.session');
    assert.equal(session.url, `https://checkout.stripe.com/c/pay/${session.id}`);
    assert.equal(session.customer, customer.id);
    assert.equal(session.client_reference_id, 'org_42');
    assert.equal(session.status, 'open');
    assert.deepEqual(session.metadata, { organizationId: 'org_42' });
  });

  test('checkout session in subscription mode without line_items is rejected with its param', async () => {
    await assert.rejects(
      stripe.checkout.sessions.create({ mode: 'subscription', success_url: 'https://app.test/ok' }),
      (e) =>
        e instanceof Stripe.errors.StripeInvalidRequestError &&
        e.statusCode === 400 &&
        e.param === 'line_items' &&
        e.code === 'parameter_missing',
    );
  });

  test('portal session for a customer this server never created is resource_missing', async () => {
    await assert.rejects(
      stripe.billingPortal.sessions.create({ customer: 'cus_unknown', return_url: 'https://app.test' }),
      (e) =>
        e instanceof Stripe.errors.StripeInvalidRequestError &&
        e.code === 'resource_missing' &&
        e.param === 'customer' &&
        e.message === "No such customer: 'cus_unknown'",
    );
    const customer = await stripe.customers.create({ name: 'Portal Co' });
    const portal = await stripe.billingPortal.sessions.create({
      customer: customer.id,
      return_url: 'https://app.test/billing',
    });
    assert.match(portal.id, /^bps_/);
    assert.match(portal.url, /^https:\/\/billing\.stripe\.com\/p\/session\/test_/);
    assert.equal(portal.return_url, 'https://app.test/billing');
  });

  test('meter events: accepted once, a duplicate identifier is a 400 that says not to retry', async () => {
    const params = {
      event_name: 'task_runs',
      identifier: 'run_1',
      timestamp: 1_800_000_000,
      payload: { stripe_customer_id: 'cus_any', value: '3' },
    };
    const event = await stripe.billing.meterEvents.create(params);
    assert.equal(event.object, 'billing.meter_event');
    assert.equal(event.identifier, 'run_1');
    assert.equal(event.timestamp, 1_800_000_000);
    assert.deepEqual(event.payload, { stripe_customer_id: 'cus_any', value: '3' });

    await assert.rejects(stripe.billing.meterEvents.create(params), (e) => {
      assert.ok(e instanceof Stripe.errors.StripeInvalidRequestError);
      assert.equal(e.statusCode, 400);
      assert.equal(e.code, undefined);
      assert.equal(e.message, 'An event already exists with identifier run_1.');
      assert.equal(e.headers?.['stripe-should-retry'], 'false');
      return true;
    });
    assert.equal(server.meterEvents.size, 1);

    await assert.rejects(
      stripe.billing.meterEvents.create({
        event_name: 'task_runs',
        payload: { stripe_customer_id: 'cus_any' },
      }),
      (e) => e instanceof Stripe.errors.StripeInvalidRequestError && e.param === 'payload[value]',
    );
  });

  test('a bad API key is a StripeAuthenticationError with the key masked', async () => {
    await assert.rejects(client('sk_bogus_0123456789abcdef').customers.create({ name: 'x' }), (e) => {
      assert.ok(e instanceof Stripe.errors.StripeAuthenticationError);
      assert.equal(e.statusCode, 401);
      assert.match(e.message, /^Invalid API Key provided: sk_b\*+cdef$/);
      return true;
    });
  });

  test('an unknown path is a 404 unrecognized request URL', async () => {
    await assert.rejects(
      stripe.rawRequest('POST', '/v1/nothing_here', {}),
      (e) =>
        e instanceof Stripe.errors.StripeInvalidRequestError &&
        e.statusCode === 404 &&
        e.message.startsWith('Unrecognized request URL (POST: /v1/nothing_here)'),
    );
  });

  test('fail() makes the next call throw the scripted error, and the one after succeed', async () => {
    server.fail('/v1/customers', 500, { type: 'api_error', message: 'Scripted outage' });
    await assert.rejects(
      stripe.customers.create({ name: 'Down' }),
      (e) =>
        e instanceof Stripe.errors.StripeAPIError && e.statusCode === 500 && e.message === 'Scripted outage',
    );
    const customer = await stripe.customers.create({ name: 'Up' });
    assert.equal(customer.name, 'Up');
  });

  test('fail() with shouldRetry lets the SDK retry under the same Idempotency-Key', async () => {
    server.fail('/v1/customers', 503, { type: 'api_error', message: 'Try again' }, { shouldRetry: true });
    const start = server.requests.length;
    const customer = await client('sk_test_123', 1).customers.create({ name: 'Retried' });
    const attempts = server.requests.slice(start);
    assert.equal(attempts.length, 2);
    assert.equal(attempts[0]!.idempotencyKey, attempts[1]!.idempotencyKey);
    assert.equal(customer.name, 'Retried');
  });
});
