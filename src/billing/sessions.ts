// Checkout (upgrade to the paid plan) and the billing portal (manage the subscription): Stripe
// hosts both; the service creates the organization's customer once and asks for a session.
import { randomUUID } from 'node:crypto';
import type Stripe from 'stripe';
import { setPaymentCustomer } from '../db/sql/billing.ts';
import { findOrganization, type OrganizationRow } from '../db/sql/organizations.ts';
import type { Deps } from '../domain/deps.ts';
import { AppError, errors } from '../lib/errors.ts';

type BillingDeps = Pick<Deps, 'db' | 'config' | 'stripe' | 'log'>;

function stripeOf(deps: BillingDeps): Stripe {
  if (!deps.stripe) {
    throw errors.billingNotConfigured(
      'Billing is not configured on this service (STRIPE_SECRET_KEY is not set)',
    );
  }
  return deps.stripe;
}

/** Stripe's failures as the service's errors: configuration problems apart from outages. */
function fromStripe(err: unknown, deps: BillingDeps, stripe: Stripe): AppError {
  if (err instanceof AppError) return err;
  // The client's own error classes (the SDK module is loaded only where Stripe is configured).
  const { StripeAuthenticationError, StripeInvalidRequestError, StripePermissionError } = stripe.errors;
  if (err instanceof StripeAuthenticationError || err instanceof StripePermissionError) {
    return errors.billingNotConfigured("Stripe refused the service's key; check STRIPE_SECRET_KEY", err);
  }
  if (err instanceof StripeInvalidRequestError) {
    return errors.billingNotConfigured(
      `Stripe refused the request (${err.message}); check the billing configuration (STRIPE_PRICE_ID)`,
      err,
    );
  }
  deps.log.error({ err }, 'stripe request failed');
  return errors.unavailable('The payment provider could not be reached; try again shortly', 30, err);
}

async function organization(deps: BillingDeps, organizationId: string): Promise<OrganizationRow> {
  const org = await findOrganization(deps.db, organizationId);
  if (!org) throw errors.notFound('Organization');
  return org;
}

/**
 * The organization's Stripe customer, created on first use. The idempotency key is the
 * organization, so two checkouts at once create one customer, and both store its id.
 */
async function customerOf(deps: BillingDeps, stripe: Stripe, org: OrganizationRow): Promise<string> {
  if (org.payment_customer_id) return org.payment_customer_id;
  const customer = await stripe.customers.create(
    { name: org.name, metadata: { organizationId: org.id } },
    { idempotencyKey: `customer-${org.id}` },
  );
  return setPaymentCustomer(deps.db, org.id, customer.id);
}

const publicPage = (deps: BillingDeps, path: string) => `${deps.config.publicUrl}${path}`;

export async function createCheckoutSession(
  deps: BillingDeps,
  organizationId: string,
): Promise<{ url: string }> {
  const stripe = stripeOf(deps);
  const priceId = deps.config.stripe.priceId;
  if (!priceId)
    throw errors.billingNotConfigured(
      'Billing is not configured on this service (STRIPE_PRICE_ID is not set)',
    );
  const org = await organization(deps, organizationId);
  if (org.plan === 'paid' && org.payment_subscription_id) {
    throw errors.conflict(
      'The organization already has a paid subscription; manage it in the billing portal',
    );
  }
  try {
    const customer = await customerOf(deps, stripe, org);
    const session = await stripe.checkout.sessions.create(
      {
        mode: 'subscription',
        customer,
        client_reference_id: org.id,
        line_items: [{ price: priceId, quantity: 1 }],
        success_url: publicPage(deps, '/dashboard/billing?checkout=success&session_id={CHECKOUT_SESSION_ID}'),
        cancel_url: publicPage(deps, '/dashboard/billing?checkout=cancelled'),
        metadata: { organizationId: org.id },
        subscription_data: { metadata: { organizationId: org.id } },
      },
      // One key per checkout request: the SDK's retries of this request reuse it.
      { idempotencyKey: `checkout-${org.id}-${randomUUID()}` },
    );
    if (!session.url) throw new Error('Stripe returned a checkout session without a url');
    return { url: session.url };
  } catch (err) {
    throw fromStripe(err, deps, stripe);
  }
}

export async function createPortalSession(
  deps: BillingDeps,
  organizationId: string,
): Promise<{ url: string }> {
  const stripe = stripeOf(deps);
  const org = await organization(deps, organizationId);
  if (!org.payment_customer_id) {
    throw errors.conflict('The organization has no billing account yet; start with a checkout');
  }
  try {
    const session = await stripe.billingPortal.sessions.create(
      { customer: org.payment_customer_id, return_url: publicPage(deps, '/dashboard/billing') },
      { idempotencyKey: `portal-${org.id}-${randomUUID()}` },
    );
    return { url: session.url };
  } catch (err) {
    throw fromStripe(err, deps, stripe);
  }
}
