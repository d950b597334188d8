// E-mail delivery over the operator's SMTP server (SVC_SMTP_URL, SVC_EMAIL_FROM). One SMTP
// transport per channel, created at the first send so that a service without mail configured
// never loads nodemailer (nor the Markdown renderer of the HTML body). A reply code tells a permanent refusal (5xx: unknown mailbox,
// policy) from a temporary one (4xx: greylisting, a full queue), which is retried.
import type { NodemailerError, SMTPSentMessageInfo, Transporter } from 'nodemailer';
import type { Config } from '../../config.ts';
import { emailAddressProblem } from '../../lib/email-address.ts';
import { type DeliveryChannel, MAX_RESPONSE_CHARS, type SendOutcome } from '../channel.ts';

export interface EmailChannelOptions {
  /** Connection, greeting and socket inactivity timeouts of one attempt. */
  timeoutMs?: number;
}

const NOT_CONFIGURED = 'E-mail delivery is not configured: set SVC_SMTP_URL and SVC_EMAIL_FROM';

/** The domain of the sender for Message-IDs (`Name <a@example.com>` or `a@example.com`). */
function senderDomain(from: string): string {
  const domain = /@([A-Za-z0-9.-]+)>?\s*$/.exec(from)?.[1];
  return domain ?? 'svc';
}

/** The SMTP password as written in the URL and decoded: neither may appear in an error. */
function secretsOf(url: string): string[] {
  try {
    const password = new URL(url).password;
    if (!password) return [];
    return [password, decodeURIComponent(password)];
  } catch {
    return [];
  }
}

export function emailChannel(config: Config['smtp'], options: EmailChannelOptions = {}): DeliveryChannel {
  const timeoutMs = options.timeoutMs ?? 15_000;
  let transport: Transporter<SMTPSentMessageInfo> | undefined;
  const secrets = config.url ? secretsOf(config.url) : [];
  const scrub = (text: string) => secrets.reduce((t, secret) => t.split(secret).join('***'), text);

  return {
    async send(target, message, signal): Promise<SendOutcome> {
      const { url, from } = config;
      if (!url || !from) return { ok: false, permanent: true, error: NOT_CONFIGURED };
      // The rule the API saved it by: a value stored another way (or before the rule) is not
      // handed to nodemailer, which would read a list, a group or a display name into it.
      const problem = emailAddressProblem(target);
      if (problem) return { ok: false, permanent: true, error: `the e-mail address ${problem}` };

      try {
        const [{ createTransport }, { htmlOf, plainTextOf, subjectOf }] = await Promise.all([
          import('nodemailer'),
          import('../content.ts'),
        ]);
        transport ??= createTransport({
          url,
          connectionTimeout: timeoutMs,
          greetingTimeout: timeoutMs,
          socketTimeout: timeoutMs,
          dnsTimeout: timeoutMs,
        });
        const info = await transport.sendMail({
          from,
          to: target,
          subject: subjectOf(message),
          text: plainTextOf(message),
          html: htmlOf(message),
          // The same on every attempt: a mail that went through although the attempt looked
          // failed (a connection lost after DATA) can be recognised as a repeat.
          messageId: `<${message.deliveryId}@${senderDomain(from)}>`,
          // RFC 3834: an automated message; keeps out-of-office replies from answering it.
          headers: { 'Auto-Submitted': 'auto-generated' },
          signal,
        });
        const response = typeof info.response === 'string' ? scrub(info.response) : '';
        return { ok: true, ...(response && { response: response.slice(0, MAX_RESPONSE_CHARS) }) };
      } catch (caught) {
        const err = caught as NodemailerError;
        if (err.code === 'EABORT' || signal.aborted) {
          return { ok: false, permanent: false, error: 'the delivery was interrupted' };
        }
        const responseCode = typeof err.responseCode === 'number' ? err.responseCode : undefined;
        // 5xx is a permanent refusal (RFC 5321), except 503 "bad sequence", a session problem
        // a new connection does not have (nodemailer's own reading; see isPermanentResponseCode).
        const permanent = responseCode !== undefined && responseCode >= 500 && responseCode !== 503;
        const response = typeof err.response === 'string' ? scrub(err.response) : '';
        const reason = scrub(err.message ?? String(caught)).slice(0, 500);
        return {
          ok: false,
          permanent,
          error: `the e-mail could not be sent: ${reason}`,
          ...(responseCode !== undefined && { statusCode: responseCode }),
          ...(response && { response: response.slice(0, MAX_RESPONSE_CHARS) }),
        };
      }
    },
  };
}
