// Usage reports are leased jobs: two reporters (two worker processes) looking at the same due
// report at the same moment send it once, and a reporter whose lease is gone records nothing.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { UsageReporter } from '../../src/billing/usage-meter.ts';
import { startTestService, type TestService } from '../helpers/service.ts';
import { type StripeTestServer, startStripeServer } from '../helpers/stripe-server.ts';

describe('usage reports under a lease', () => {
  let stripe: StripeTestServer;
  let svc: TestService;

  before(async () => {
    stripe = await startStripeServer();
    svc = await startTestService({
      env: {
        STRIPE_SECRET_KEY: 'sk_test_meter_lease_0123456789',
        STRIPE_WEBHOOK_SECRET: 'whsec_test_meter_lease_0123456789',
        STRIPE_PRICE_ID: 'price_paid_monthly',
        SVC_STRIPE_API_BASE: stripe.url,
      },
    });
  });

  after(async () => {
    await svc?.close();
    await stripe?.close();
  });

  /** A due, unsent report of a paid organization with a Stripe customer. */
  async function dueReport(): Promise<{ id: string; customer: string }> {
    const org = await svc.createOrg('paid');
    const customer = `cus_${randomUUID().slice(0, 12)}`;
    const id = randomUUID();
    const { db } = svc.service.deps;
    await db.query('UPDATE organizations SET payment_customer_id = $2 WHERE id = $1', [
      org.organizationId,
      customer,
    ]);
    await db.query(
      `INSERT INTO meter_reports (id, organization_id, period_start, value_cents, created_at, next_attempt_at)
       VALUES ($1, $2, now() - interval '1 day', 250, now() - interval '1 minute', now() - interval '1 minute')`,
      [id, org.organizationId],
    );
    return { id, customer };
  }

  const sendsOf = (id: string) =>
    stripe.requests.filter((r) => r.path === '/v1/billing/meter_events' && r.form.identifier === id).length;

  test('two reporters looking at one due report at once send it to Stripe once', async () => {
    const report = await dueReport();
    const { deps } = svc.service;
    const sent = await Promise.all([new UsageReporter(deps).sendDue(), new UsageReporter(deps).sendDue()]);
    assert.equal(sent[0] + sent[1], 1);
    assert.equal(sendsOf(report.id), 1);
    const [row] = await deps.db.query<{ sent: boolean; attempts: number }>(
      'SELECT sent_at IS NOT NULL AS sent, attempts FROM meter_reports WHERE id = $1',
      [report.id],
    );
    assert.deepEqual(row, { sent: true, attempts: 1 });
  });
});
