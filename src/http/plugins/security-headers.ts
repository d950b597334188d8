import type { App } from '../types.ts';

/**
 * Headers every answer carries unless its route set its own (the dashboard sets a policy for
 * its pages, the API reference page the one its scripts need). JSON and plain-text answers are
 * never sniffed as HTML, never framed, and would load nothing if a browser rendered them; no
 * URL of the service is sent on as a referrer.
 */
const DEFAULTS: Record<string, string> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
};
const ENTRIES = Object.entries(DEFAULTS);

export function installSecurityHeaders(app: App): void {
  app.addHook('onSend', (_request, reply, payload, done) => {
    for (const [name, value] of ENTRIES) {
      if (!reply.hasHeader(name)) reply.header(name, value);
    }
    done(null, payload);
  });
}
