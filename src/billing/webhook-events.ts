// What a verified Stripe event changes. Stripe delivers at least once and in no guaranteed
// order, so every event is applied once (by id) and only when it is not older than what was
// already applied (subscription events carry their `created` time; billing periods only move
// forward).
import type Stripe from 'stripe';
import type { Queryable } from '../db/db.ts';
import {
  applySubscription,
  findOrganizationByCustomer,
  recordBillingEvent,
  setPaymentCustomer,
  startBillingPeriod,
} from '../db/sql/billing.ts';
import { findOrganization, type OrganizationRow } from '../db/sql/organizations.ts';
import type { Deps } from '../domain/deps.ts';
import type { Plan } from '../domain/plans.ts';

export type WebhookOutcome = 'applied' | 'duplicate' | 'stale' | 'ignored' | 'unknown_organization';

/** Subscription states that keep the paid plan: Stripe still collects (past_due retries). */
const PAID_STATUSES = new Set(['active', 'trialing', 'past_due']);

const idOf = (x: string | { id: string } | null | undefined) => (typeof x === 'string' ? x : x?.id);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The organization an event is about: by its Stripe customer, else by the metadata we set. */
async function organizationOf(
  db: Queryable,
  customerId: string | undefined,
  metadata: Record<string, string> | null | undefined,
): Promise<OrganizationRow | undefined> {
  if (customerId) {
    const byCustomer = await findOrganizationByCustomer(db, customerId);
    if (byCustomer) return byCustomer;
  }
  const claimed = metadata?.organizationId;
  return claimed && UUID.test(claimed) ? findOrganization(db, claimed.toLowerCase()) : undefined;
}

async function applyEvent(tx: Queryable, event: Stripe.Event): Promise<WebhookOutcome> {
  const eventAt = new Date(event.created * 1000);
  switch (event.type) {
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted':
    case 'customer.subscription.paused':
    case 'customer.subscription.resumed': {
      const sub = event.data.object;
      const customerId = idOf(sub.customer);
      const org = await organizationOf(tx, customerId, sub.metadata);
      if (!org || !customerId) return 'unknown_organization';
      const plan: Plan =
        event.type !== 'customer.subscription.deleted' && PAID_STATUSES.has(sub.status) ? 'paid' : 'free';
      const applied = await applySubscription(tx, org.id, {
        plan,
        subscriptionId: sub.id,
        status: event.type === 'customer.subscription.deleted' ? 'canceled' : sub.status,
        eventAt,
        customerId,
      });
      return applied ? 'applied' : 'stale';
    }
    case 'invoice.paid': {
      const invoice = event.data.object;
      const org = await organizationOf(tx, idOf(invoice.customer), invoice.metadata);
      if (!org) return 'unknown_organization';
      // The subscription line's period is the one the payment starts; the invoice's own
      // period_start/period_end describe the period before it.
      const start = invoice.lines?.data?.[0]?.period?.start ?? invoice.period_end;
      return (await startBillingPeriod(tx, org.id, new Date(start * 1000))) ? 'applied' : 'stale';
    }
    case 'checkout.session.completed': {
      const session = event.data.object;
      const customerId = idOf(session.customer);
      const claimed = session.client_reference_id;
      if (!customerId || !claimed || !UUID.test(claimed)) return 'ignored';
      const org = await findOrganization(tx, claimed.toLowerCase());
      if (!org) return 'unknown_organization';
      await setPaymentCustomer(tx, org.id, customerId);
      return 'applied';
    }
    default:
      return 'ignored';
  }
}

/** Applies a verified event once; a redelivered event is a no-op. One transaction. */
export async function handleStripeEvent(
  deps: Pick<Deps, 'db' | 'clock' | 'log' | 'principals'>,
  event: Stripe.Event,
): Promise<WebhookOutcome> {
  const outcome = await deps.db.transaction(async (tx) => {
    if (!(await recordBillingEvent(tx, event.id, event.type, deps.clock.now()))) return 'duplicate' as const;
    return applyEvent(tx, event);
  });
  // A plan change changes rate limits: every api process forgets what it cached.
  if (outcome === 'applied') await deps.principals.changed();
  deps.log.info({ eventId: event.id, type: event.type, outcome }, 'stripe event');
  return outcome;
}
