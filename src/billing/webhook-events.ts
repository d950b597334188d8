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

/** A Stripe id or status as the database can store it. */
const isText = (v: unknown): v is string =>
  typeof v === 'string' && v.length > 0 && v.length <= 255 && !v.includes('\u0000') && v.isWellFormed();
/** Unix seconds that make a date (and a PostgreSQL timestamp). */
const isSeconds = (v: unknown): v is number =>
  Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) < 1e11;
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Where a signed event lacks what `applyEvent` reads for its type, as a JSON pointer into the
 * body with the reason; undefined when the event can be applied. Stripe never sends such an
 * event, but a valid signature must not be enough to make the service fail.
 */
export function malformedEvent(event: unknown): { path: string; message: string } | undefined {
  if (!isObject(event)) return { path: '', message: 'must be an object' };
  if (!isText(event.id)) return { path: '/id', message: 'must be a Stripe event id' };
  if (!isText(event.type)) return { path: '/type', message: 'must be an event type' };
  if (!isSeconds(event.created)) return { path: '/created', message: 'must be Unix seconds' };
  const data = event.data;
  if (!isObject(data) || !isObject(data.object))
    return { path: '/data/object', message: 'must be an object' };
  const object = data.object;
  const at = (key: string) => `/data/object/${key}`;
  const optionalText = (key: string) => {
    const v = object[key];
    return v === undefined || v === null || isText(v)
      ? undefined
      : { path: at(key), message: 'must be a string' };
  };
  const customer = () => {
    const v = object.customer;
    if (v === undefined || v === null || isText(v) || (isObject(v) && isText(v.id))) return undefined;
    return { path: at('customer'), message: 'must be a customer id or a customer' };
  };
  const metadata = () => {
    const v = object.metadata;
    if (v === undefined || v === null) return undefined;
    if (!isObject(v)) return { path: at('metadata'), message: 'must be an object' };
    const claimed = v.organizationId;
    return claimed === undefined || claimed === null || typeof claimed === 'string'
      ? undefined
      : { path: at('metadata/organizationId'), message: 'must be a string' };
  };
  switch (event.type) {
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted':
    case 'customer.subscription.paused':
    case 'customer.subscription.resumed':
      if (!isText(object.id)) return { path: at('id'), message: 'must be a subscription id' };
      if (!isText(object.status)) return { path: at('status'), message: 'must be a subscription status' };
      return customer() ?? metadata();
    case 'invoice.paid': {
      const lines = isObject(object.lines) && Array.isArray(object.lines.data) ? object.lines.data : [];
      const line = lines[0];
      const start = isObject(line) && isObject(line.period) ? line.period.start : undefined;
      if (start !== undefined && start !== null && !isSeconds(start)) {
        return { path: at('lines/data/0/period/start'), message: 'must be Unix seconds' };
      }
      if ((start === undefined || start === null) && !isSeconds(object.period_end)) {
        return { path: at('period_end'), message: 'must be Unix seconds' };
      }
      return customer() ?? metadata();
    }
    case 'checkout.session.completed':
      return customer() ?? optionalText('client_reference_id');
    default:
      return undefined;
  }
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
