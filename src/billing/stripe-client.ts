// The Stripe client of the configuration, through the official SDK. SVC_STRIPE_API_BASE
// points it at another server that speaks Stripe's API (tests, a proxy).
import type Stripe from 'stripe';
import type { Config } from '../config.ts';

/** Requests to Stripe give up after this long; the SDK retries network errors and 409/429/5xx. */
const STRIPE_TIMEOUT_MS = 15_000;
const STRIPE_MAX_RETRIES = 2;

export type StripeClient = Stripe;

/**
 * The client, or undefined when STRIPE_SECRET_KEY is not set (billing not configured). The SDK
 * is imported only then: a service without billing never loads it.
 */
export async function createStripeClient(config: Config['stripe']): Promise<Stripe | undefined> {
  if (!config.secretKey) return undefined;
  const { default: Stripe } = await import('stripe');
  const base = config.apiBase ? new URL(config.apiBase) : undefined;
  return new Stripe(config.secretKey, {
    maxNetworkRetries: STRIPE_MAX_RETRIES,
    timeout: STRIPE_TIMEOUT_MS,
    ...(base && {
      host: base.hostname,
      protocol: base.protocol === 'http:' ? 'http' : 'https',
      ...(base.port && { port: Number(base.port) }),
    }),
  });
}
