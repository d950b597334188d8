import type Stripe from 'stripe';
import { Type } from 'typebox';
import { createCheckoutSession, createPortalSession } from '../../billing/sessions.ts';
import { handleStripeEvent, malformedEvent } from '../../billing/webhook-events.ts';
import type { Deps } from '../../domain/deps.ts';
import { errors } from '../../lib/errors.ts';
import { BillingSession, BillingSessionBody } from '../../schemas/billing.ts';
import { errorResponses } from '../../schemas/common.ts';
import { type App, principalOf } from '../types.ts';

const tags = ['billing'];

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function billingRoutes(app: App, deps: Deps): void {
  app.post(
    '/billing/checkout',
    {
      schema: {
        operationId: 'createCheckoutSession',
        description:
          'Answers the URL of a Stripe Checkout session that upgrades the organization to the paid plan. 503 when billing is not configured on this server; 409 when the organization already subscribes.',
        tags,
        summary: 'A Stripe Checkout session to upgrade the organization to the paid plan',
        body: BillingSessionBody,
        response: { 200: BillingSession, ...errorResponses(400, 401, 404, 409, 413, 415, 429, 503) },
      },
    },
    async (request) => createCheckoutSession(deps, principalOf(request).organizationId),
  );

  app.post(
    '/billing/portal',
    {
      schema: {
        operationId: 'createPortalSession',
        description:
          "Answers the URL of a Stripe billing portal session where the organization's subscription is managed. 503 when billing is not configured; 409 when the organization has no Stripe customer yet.",
        tags,
        summary: "A Stripe billing portal session to manage the organization's subscription",
        body: BillingSessionBody,
        response: { 200: BillingSession, ...errorResponses(400, 401, 404, 409, 413, 415, 429, 503) },
      },
    },
    async (request) => createPortalSession(deps, principalOf(request).organizationId),
  );
}

/**
 * Stripe's events: public (no API key), since Stripe signs them with STRIPE_WEBHOOK_SECRET;
 * registered in the public scope (app.ts) under its full path.
 */
export function stripeWebhookRoutes(app: App, deps: Deps): void {
  // Stripe's signature is over the exact bytes sent, so this route keeps the body raw.
  app.register(async (scope) => {
    // Replaces the app's strict-UTF-8 parser in this scope only.
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
      done(null, body);
    });
    scope.post(
      '/api/svc/billing/webhook',
      {
        schema: {
          operationId: 'receiveStripeWebhook',
          description:
            'Stripe calls this with subscription events, signed with STRIPE_WEBHOOK_SECRET; a request whose signature does not verify is a 400. Not for API clients.',
          tags,
          summary: 'Stripe webhook events (signed with STRIPE_WEBHOOK_SECRET; no API key)',
          security: [],
          response: {
            200: Type.Object({ received: Type.Boolean() }),
            ...errorResponses(400, 413, 415, 503),
          },
        },
      },
      async (request) => {
        const secret = deps.config.stripe.webhookSecret;
        if (!secret) {
          throw errors.billingNotConfigured(
            'Stripe webhooks are not configured (STRIPE_WEBHOOK_SECRET is not set)',
          );
        }
        const signature = request.headers['stripe-signature'];
        if (typeof signature !== 'string' || !Buffer.isBuffer(request.body)) {
          throw errors.validation('A Stripe-Signature header and a JSON body are required', [
            typeof signature === 'string'
              ? { path: '/body', message: 'is required' }
              : { path: '/headers/stripe-signature', message: 'is required' },
          ]);
        }
        // The SDK is loaded on the first webhook: a process that never receives one never loads it.
        const { default: StripeSdk } = await import('stripe');
        let event: Stripe.Event;
        try {
          event = StripeSdk.webhooks.constructEvent(request.body, signature, secret);
        } catch (err) {
          const reason = err instanceof Error ? err.message : 'unknown reason';
          throw errors.validation(
            `The Stripe signature is not valid: ${reason}`,
            [{ path: '/headers/stripe-signature', message: `is not valid: ${reason}` }],
            err,
          );
        }
        const problem = malformedEvent(event);
        if (problem) {
          const path = `/body${problem.path}`;
          throw errors.validation(`The Stripe event is malformed: ${path} ${problem.message}`, [
            { path, message: problem.message },
          ]);
        }
        await handleStripeEvent(deps, event);
        return { received: true };
      },
    );
  });
}
