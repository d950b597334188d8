// A local server speaking Stripe's v1 wire format, for driving the official `stripe` SDK in tests
// (`new Stripe(key, { host: '127.0.0.1', port, protocol: 'http' })`). It implements only the
// endpoints the service calls, with Stripe's validation, error envelopes and idempotency rules,
// so that what passes here has a fair chance of passing against the real API.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A decoded form value: bracket notation nests into objects and arrays; leaves stay strings. */
export type StripeFormValue = string | StripeFormValue[] | { [key: string]: StripeFormValue };
export type StripeForm = { [key: string]: StripeFormValue };

export interface StripeRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  stripeVersion: string | undefined;
  form: StripeForm;
}

export interface StripeErrorBody {
  type: string;
  message: string;
  code?: string;
  param?: string;
}

export interface StripeServerOptions {
  /** Accept only this key; by default any `sk_test_…`, `sk_live_…` or `rk_…` key is accepted. */
  apiKey?: string;
}

export interface StripeFailOptions {
  /**
   * Sent as `Stripe-Should-Retry`. Defaults to false: the SDK retries 409s and 5xx on its own
   * (maxNetworkRetries defaults to 2), which would swallow a one-shot failure. Pass true to let it
   * retry, e.g. to test that a retry reuses the same Idempotency-Key.
   */
  shouldRetry?: boolean;
}

export interface StripeTestServer {
  /** e.g. `http://127.0.0.1:54321`. */
  url: string;
  host: string;
  port: number;
  /** Every request received, including rejected ones, in arrival order. */
  requests: StripeRequest[];
  /** Customers created through `POST /v1/customers` (tests may seed more). */
  customers: Map<string, Record<string, unknown>>;
  /** Accepted meter events, by identifier. */
  meterEvents: Map<string, Record<string, unknown>>;
  /** The next request to `path` (each call queues one) answers `status` with this error. */
  fail(path: string, status: number, error: StripeErrorBody, options?: StripeFailOptions): void;
  close(): Promise<void>;
}

/** Decodes `a[b][0][c]=1&a[b][0][d]=2` into `{ a: { b: [{ c: '1', d: '2' }] } }`, as Stripe reads it. */
export function decodeStripeForm(body: string): StripeForm {
  const root: StripeForm = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const match = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
    const segments = match
      ? [match[1] ?? key, ...[...(match[2] ?? '').matchAll(/\[([^[\]]*)\]/g)].map((m) => m[1] ?? '')]
      : [key];
    // Prototype keys would turn a test helper into a pollution vector; Stripe has none anyway.
    if (segments.some((s) => s === '__proto__' || s === 'constructor' || s === 'prototype')) continue;
    let container: StripeFormValue[] | StripeForm = root;
    for (let i = 0; i < segments.length; i++) {
      const segment = segments[i] ?? '';
      const next = segments[i + 1];
      // Arrays are filled through their numeric-string keys, so both shapes index the same way.
      const slots = container as Record<string, StripeFormValue | undefined>;
      const slot: string = Array.isArray(container) && segment === '' ? String(container.length) : segment;
      if (next === undefined) {
        slots[slot] = value;
        break;
      }
      const existing: StripeFormValue | undefined = slots[slot];
      if (typeof existing === 'string') break; // `a=1&a[b]=2`: a scalar cannot take children.
      // The next segment decides a new child's shape: an index (or `[]`) makes an array.
      const child: StripeFormValue[] | StripeForm = existing ?? (/^\d*$/.test(next) ? [] : {});
      slots[slot] = child;
      container = child;
    }
  }
  return root;
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
function randomId(prefix: string, length: number): string {
  return prefix + [...randomBytes(length)].map((b) => ALPHANUMERIC[b % ALPHANUMERIC.length]).join('');
}

const str = (v: StripeFormValue | undefined): string | undefined => (typeof v === 'string' ? v : undefined);
const obj = (v: StripeFormValue | undefined): Record<string, StripeFormValue> =>
  v !== undefined && typeof v === 'object' && !Array.isArray(v) ? v : {};
const now = (): number => Math.floor(Date.now() / 1000);

/** Stripe echoes a key in errors with its middle starred out: `sk_test_****************1234`. */
function maskKey(key: string): string {
  const prefix = /^(sk|rk|pk)_(test|live)_/.exec(key)?.[0] ?? key.slice(0, Math.min(4, key.length));
  const rest = key.slice(prefix.length);
  const shown = rest.length > 8 ? rest.slice(-4) : '';
  return prefix + '*'.repeat(rest.length - shown.length) + shown;
}

/** Thrown by handlers to answer with Stripe's error envelope. */
class StripeHttpError extends Error {
  readonly status: number;
  readonly body: StripeErrorBody;
  readonly headers: Record<string, string>;
  constructor(status: number, body: StripeErrorBody, headers: Record<string, string> = {}) {
    super(body.message);
    this.status = status;
    this.body = body;
    this.headers = headers;
  }
}
const missing = (param: string): StripeHttpError =>
  new StripeHttpError(400, {
    type: 'invalid_request_error',
    code: 'parameter_missing',
    param,
    message: `Missing required param: ${param}.`,
  });

interface Stored {
  method: string;
  path: string;
  body: string;
  status: number;
  payload: string;
  requestId: string;
}

export async function startStripeServer(options: StripeServerOptions = {}): Promise<StripeTestServer> {
  const requests: StripeRequest[] = [];
  const customers = new Map<string, Record<string, unknown>>();
  const meterEvents = new Map<string, Record<string, unknown>>();
  const failures = new Map<string, { status: number; error: StripeErrorBody; shouldRetry: boolean }[]>();
  const idempotent = new Map<string, Stored>();

  const requireCustomer = (id: string | undefined, param: string): string => {
    if (!id) throw missing(param);
    if (!customers.has(id)) {
      throw new StripeHttpError(400, {
        type: 'invalid_request_error',
        code: 'resource_missing',
        param,
        message: `No such customer: '${id}'`,
      });
    }
    return id;
  };

  const routes: Record<string, (form: StripeForm, livemode: boolean) => Record<string, unknown>> = {
    '/v1/customers': (form, livemode) => {
      const customer = {
        id: randomId('cus_', 14),
        object: 'customer',
        name: str(form.name) ?? null,
        email: str(form.email) ?? null,
        description: str(form.description) ?? null,
        metadata: obj(form.metadata),
        balance: 0,
        currency: null,
        delinquent: false,
        created: now(),
        livemode,
      };
      customers.set(customer.id, customer);
      return customer;
    },
    '/v1/checkout/sessions': (form, livemode) => {
      const mode = str(form.mode);
      if (!mode) throw missing('mode');
      // `hosted_page` is the default ui_mode in this API version (`hosted` before it was renamed).
      const uiMode = str(form.ui_mode) ?? 'hosted_page';
      const hosted = uiMode === 'hosted_page' || uiMode === 'hosted';
      if (hosted && !str(form.success_url)) throw missing('success_url');
      if (mode === 'subscription' && !Array.isArray(form.line_items)) throw missing('line_items');
      const customer = form.customer === undefined ? null : requireCustomer(str(form.customer), 'customer');
      const id = randomId('cs_test_', 58);
      const created = now();
      return {
        id,
        object: 'checkout.session',
        mode,
        ui_mode: uiMode,
        customer,
        customer_email: str(form.customer_email) ?? null,
        client_reference_id: str(form.client_reference_id) ?? null,
        success_url: str(form.success_url) ?? null,
        cancel_url: str(form.cancel_url) ?? null,
        url: hosted ? `https://checkout.stripe.com/c/pay/${id}` : null,
        metadata: obj(form.metadata),
        status: 'open',
        payment_status: 'unpaid',
        subscription: null,
        created,
        expires_at: created + 24 * 3600,
        livemode,
      };
    },
    '/v1/billing_portal/sessions': (form, livemode) => ({
      id: randomId('bps_', 24),
      object: 'billing_portal.session',
      customer: requireCustomer(str(form.customer), 'customer'),
      return_url: str(form.return_url) ?? null,
      url: `https://billing.stripe.com/p/session/test_${randomId('', 40)}`,
      configuration: randomId('bpc_', 24),
      created: now(),
      livemode,
    }),
    '/v1/billing/meter_events': (form, livemode) => {
      const eventName = str(form.event_name);
      if (!eventName) throw missing('event_name');
      if (form.payload === undefined) throw missing('payload');
      const payload = obj(form.payload);
      if (!str(payload.stripe_customer_id)) throw missing('payload[stripe_customer_id]');
      if (!str(payload.value)) throw missing('payload[value]');
      // Stripe documents only that it "will enforce uniqueness [of identifier] within a rolling period
      // of at least 24 hours" (https://docs.stripe.com/api/billing/meter-event/create#create_billing_meter_event-identifier),
      // not how. Integrators report a synchronous rejection: 400 invalid_request_error "An event already
      // exists with identifier <id>." with `stripe-should-retry: false` and no `code`
      // (https://github.com/langfuse/langfuse/pull/16292). The v2 endpoint's `duplicate_meter_event`
      // code (stripe/openapi `v2.error.duplicate_meter_event`) is not sent by v1, so it is absent here
      // too: a service must recognise the duplicate by status and message. The window here is the
      // server's lifetime. Customer mapping and value are validated asynchronously by Stripe (error
      // reports via webhook), so an unknown customer is accepted, as Stripe does.
      const identifier = str(form.identifier) ?? randomId('', 32);
      if (meterEvents.has(identifier)) {
        throw new StripeHttpError(
          400,
          {
            type: 'invalid_request_error',
            message: `An event already exists with identifier ${identifier}.`,
          },
          { 'Stripe-Should-Retry': 'false' },
        );
      }
      const event = {
        object: 'billing.meter_event',
        event_name: eventName,
        identifier,
        payload,
        timestamp: Number(str(form.timestamp) ?? now()),
        created: now(),
        livemode,
      };
      meterEvents.set(identifier, event);
      return event;
    },
  };

  const server = createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const method = req.method ?? '';
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const authorization = req.headers.authorization;
    const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
    const stripeVersion = req.headers['stripe-version'] as string | undefined;
    const form = decodeStripeForm(raw);
    requests.push({ method, path, authorization, idempotencyKey, stripeVersion, form });

    const requestId = randomId('req_', 14);
    const send = (status: number, payload: string, headers: Record<string, string> = {}): void => {
      res.writeHead(status, {
        'Content-Type': 'application/json',
        'Request-Id': requestId,
        ...(stripeVersion ? { 'Stripe-Version': stripeVersion } : {}),
        ...(idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : {}),
        ...headers,
      });
      res.end(payload);
    };
    const sendError = (e: StripeHttpError): void =>
      send(e.status, JSON.stringify({ error: e.body }), e.headers);

    // Authentication comes first: Stripe checks the key before it looks at the route.
    const key = /^Bearer (.*)$/.exec(authorization ?? '')?.[1];
    if (!key) {
      return sendError(
        new StripeHttpError(401, {
          type: 'invalid_request_error',
          message:
            "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
        }),
      );
    }
    const valid = options.apiKey ? key === options.apiKey : /^(sk_test_|sk_live_|rk_)\S+$/.test(key);
    if (!valid) {
      return sendError(
        new StripeHttpError(401, {
          type: 'invalid_request_error',
          message: `Invalid API Key provided: ${maskKey(key)}`,
        }),
      );
    }

    const scripted = failures.get(path)?.shift();
    if (scripted) {
      // Not saved under the Idempotency-Key, as for a request Stripe rejected before executing it,
      // so a retry with the same key runs for real.
      return sendError(
        new StripeHttpError(scripted.status, scripted.error, {
          'Stripe-Should-Retry': String(scripted.shouldRetry),
        }),
      );
    }

    const route = method === 'POST' ? routes[path] : undefined;
    if (!route) {
      return sendError(
        new StripeHttpError(404, {
          type: 'invalid_request_error',
          message: `Unrecognized request URL (${method}: ${path}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
        }),
      );
    }

    // https://docs.stripe.com/api/idempotent_requests: a reused key replays the saved status and body,
    // and is refused with an idempotency_error when the endpoint or the parameters differ.
    const stored = idempotencyKey ? idempotent.get(idempotencyKey) : undefined;
    if (idempotencyKey && stored) {
      const reuse = `Try using a key other than '${idempotencyKey}' if you meant to execute a different request.`;
      if (stored.method !== method || stored.path !== path) {
        return sendError(
          new StripeHttpError(400, {
            type: 'idempotency_error',
            message: `Keys for idempotent requests can only be used for the same endpoint they were first used for ('${stored.method} ${stored.path}' vs '${method} ${path}'). ${reuse}`,
          }),
        );
      }
      if (stored.body !== raw) {
        return sendError(
          new StripeHttpError(400, {
            type: 'idempotency_error',
            message: `Keys for idempotent requests can only be used with the same parameters they were first used with. ${reuse}`,
          }),
        );
      }
      return send(stored.status, stored.payload, {
        'Idempotent-Replayed': 'true',
        'Original-Request': stored.requestId,
      });
    }

    try {
      const payload = JSON.stringify(route(form, /^(sk|rk)_live_/.test(key)));
      // Only successes are saved; Stripe also saves errors raised once an endpoint has started.
      if (idempotencyKey)
        idempotent.set(idempotencyKey, { method, path, body: raw, status: 200, payload, requestId });
      send(200, payload);
    } catch (e) {
      if (e instanceof StripeHttpError) sendError(e);
      else send(500, JSON.stringify({ error: { type: 'api_error', message: String(e) } }));
    }
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    host: '127.0.0.1',
    port,
    requests,
    customers,
    meterEvents,
    fail(path, status, error, failOptions = {}) {
      const queue = failures.get(path) ?? [];
      queue.push({ status, error, shouldRetry: failOptions.shouldRetry ?? false });
      failures.set(path, queue);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
