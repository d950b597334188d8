// SMS delivery through a Twilio-compatible Messages API. The provider is the operator's
// (SVC_SMS_API_BASE), not a user's URL, so the caller passes a plain fetch, not the SSRF-guarded
// one: an operator may well run a gateway on a private address.
import type { Config } from '../../config.ts';
import type { FetchLike } from '../../lib/outbound.ts';
import { type DeliveryChannel, MAX_RESPONSE_CHARS, type SendOutcome } from '../channel.ts';
import { durationText, networkErrorText, readResponseText, retryAfterMs } from './webhook.ts';

/** E.164: a plus, a country code that does not start with 0, at most 15 digits in all. */
const E164 = /^\+[1-9]\d{6,14}$/;

const VARIABLES = {
  apiBase: 'SVC_SMS_API_BASE',
  accountSid: 'SVC_SMS_ACCOUNT_SID',
  authToken: 'SVC_SMS_AUTH_TOKEN',
  from: 'SVC_SMS_FROM',
} as const;

/** Twilio's error body: `{ code, message, more_info, status }`. */
function providerMessage(text: string): string | undefined {
  try {
    const parsed = JSON.parse(text) as { message?: unknown; code?: unknown };
    if (typeof parsed.message !== 'string') return undefined;
    const code =
      typeof parsed.code === 'number' || typeof parsed.code === 'string' ? ` (code ${parsed.code})` : '';
    return `${parsed.message.slice(0, 300)}${code}`;
  } catch {
    return undefined;
  }
}

/** `timeoutMs`: how long one attempt waits for the provider (SVC_DELIVERY_TIMEOUT_SECONDS). */
export function smsChannel(config: Config['sms'], fetch: FetchLike, timeoutMs = 15_000): DeliveryChannel {
  return {
    async send(target, message, signal): Promise<SendOutcome> {
      const missing = (Object.keys(VARIABLES) as (keyof typeof VARIABLES)[])
        .filter((key) => !config[key])
        .map((key) => VARIABLES[key]);
      if (missing.length > 0) {
        return {
          ok: false,
          permanent: true,
          error: `SMS delivery is not configured: set ${missing.join(', ')}`,
        };
      }
      // The checks above leave every field set; TypeScript does not follow them through keys.
      const { apiBase, accountSid, authToken, from } = config as Required<{
        [K in keyof Config['sms']]: string;
      }>;
      if (!E164.test(target)) {
        return {
          ok: false,
          permanent: true,
          error: 'the SMS number must be in E.164 form, like +14155550123',
        };
      }

      // The token never appears in an error: only the provider's answer and network codes do.
      const scrub = (text: string) => text.split(authToken).join('***');
      const url = `${apiBase}/2010-04-01/Accounts/${encodeURIComponent(accountSid)}/Messages.json`;
      // Loaded at the first send, as the e-mail channel's (content.ts brings the Markdown renderer).
      const { smsTextOf } = await import('../content.ts');
      const timeout = AbortSignal.timeout(timeoutMs);
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            authorization: `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString('base64')}`,
            accept: 'application/json',
          },
          body: new URLSearchParams({ To: target, From: from, Body: smsTextOf(message) }).toString(),
          signal: AbortSignal.any([signal, timeout]),
        });
      } catch (err) {
        if (timeout.aborted) {
          return {
            ok: false,
            permanent: false,
            error: `the SMS provider did not answer within ${durationText(timeoutMs)}`,
          };
        }
        if (signal.aborted) return { ok: false, permanent: false, error: 'the delivery was interrupted' };
        return {
          ok: false,
          permanent: false,
          error: scrub(`the SMS provider could not be reached: ${networkErrorText(err)}`),
        };
      }

      const statusCode = response.status;
      // Read whole (up to the 64 KB cap): a success's JSON can be longer than what the log keeps.
      const full = scrub(await readResponseText(response, Number.POSITIVE_INFINITY));
      const text = full.slice(0, MAX_RESPONSE_CHARS);
      if (statusCode >= 200 && statusCode < 300) {
        let sid: string | undefined;
        try {
          const parsed = JSON.parse(full) as { sid?: unknown };
          if (typeof parsed.sid === 'string') sid = parsed.sid;
        } catch {
          // Not JSON: keep the text.
        }
        const kept = (sid ?? text).slice(0, MAX_RESPONSE_CHARS);
        return { ok: true, statusCode, ...(kept !== '' && { response: kept }) };
      }

      const detail = providerMessage(full);
      const error = `the SMS provider answered ${statusCode}${detail ? `: ${detail}` : ''}`;
      const answer = text === '' ? {} : { response: text };
      // A 4xx says this message (number, sender, account) is wrong and will stay wrong, except
      // a request timeout (408) and rate limiting (429).
      if (statusCode >= 400 && statusCode < 500 && statusCode !== 408 && statusCode !== 429) {
        return { ok: false, permanent: true, statusCode, error, ...answer };
      }
      const wait = retryAfterMs(response.headers.get('retry-after'));
      return {
        ok: false,
        permanent: false,
        statusCode,
        error,
        ...answer,
        ...(wait !== undefined && { retryAfterMs: wait }),
      };
    },
  };
}
