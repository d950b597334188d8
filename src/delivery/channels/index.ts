// The three delivery channels, wired from the configuration. Each is built once per process:
// the e-mail channel keeps its SMTP transport between sends.
import type { Config } from '../../config.ts';
import { type FetchLike, outboundFetch } from '../../lib/outbound.ts';
import type { ChannelType, DeliveryChannel } from '../channel.ts';
import { emailChannel } from './email.ts';
import { smsChannel } from './sms.ts';
import { webhookChannel } from './webhook.ts';

export interface ChannelDeps {
  config: Config;
  /**
   * The plain fetch for the operator's SMS provider (default globalThis.fetch). Webhooks
   * always use the SSRF-guarded `outboundFetch(config)`: a webhook URL is a user's URL, and no
   * caller should be able to wire the guard away by accident.
   */
  fetch?: FetchLike;
  /** The organization's `whsec_…` webhook signing secret. */
  secretOf(organizationId: string): Promise<string>;
}

export function createChannels(deps: ChannelDeps): Record<ChannelType, DeliveryChannel> {
  const { config } = deps;
  return {
    email: emailChannel(config.smtp, { timeoutMs: config.delivery.attemptTimeoutMs }),
    sms: smsChannel(
      config.sms,
      deps.fetch ?? ((input, init) => globalThis.fetch(input, init)),
      config.delivery.attemptTimeoutMs,
    ),
    webhook: webhookChannel({
      timeoutMs: config.delivery.attemptTimeoutMs,
      fetch: outboundFetch(config),
      secretOf: (organizationId) => deps.secretOf(organizationId),
    }),
  };
}
