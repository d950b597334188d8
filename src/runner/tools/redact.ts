// Messages about a source (failed connections, failed calls) go to run errors, test answers and
// the model; none may show a secret of the source. These helpers blank them out.
import { SECRET_MASK } from '../../schemas/bounds.ts';
import type { SourceToConnect } from './types.ts';

/** Values shorter than this are left alone: blanking them would garble ordinary words. */
const MIN_SECRET_LENGTH = 4;

/**
 * Every form in which a source's secrets could appear in a message: the credentials and
 * config.env values, as sent in headers (`extra`, e.g. "Bearer <token>"), URL-encoded, and the
 * Basic-auth encoding of user name and password. Longest first, so a value containing another
 * is blanked whole.
 */
export function secretValues(
  source: Pick<SourceToConnect, 'secrets'>,
  extra: readonly string[] = [],
): string[] {
  const { credentials, env } = source.secrets;
  const raw = [...Object.values(credentials), ...Object.values(env), ...extra].filter(
    (v): v is string => typeof v === 'string' && v.length >= MIN_SECRET_LENGTH,
  );
  if (credentials.username !== undefined && credentials.password !== undefined) {
    raw.push(Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64'));
  }
  return encodedForms(raw, MIN_SECRET_LENGTH);
}

/** Credentials shorter than this are left in tool results: blanking them would garble data. */
const MIN_CREDENTIAL_LENGTH = 8;

/**
 * The forms of a source's credentials to blank out of what its tools return (tool results go to
 * the model, which injected text may steer into passing them on). The token, API key and
 * password, and the Basic-auth encoding; not the user name, nor config.env values, which a server
 * may legitimately report and which can be ordinary words.
 */
export function credentialValues(source: Pick<SourceToConnect, 'secrets'>): string[] {
  const { token, apiKey, password, username } = source.secrets.credentials;
  const raw = [token, apiKey, password].filter(
    (v): v is string => typeof v === 'string' && v.length >= MIN_CREDENTIAL_LENGTH,
  );
  if (username !== undefined && password !== undefined) {
    raw.push(Buffer.from(`${username}:${password}`).toString('base64'));
  }
  return encodedForms(raw, MIN_CREDENTIAL_LENGTH);
}

/** Each value as is, URL-encoded and form-encoded; at least `min` long, longest first. */
function encodedForms(values: readonly string[], min: number): string[] {
  const forms = new Set(
    values.flatMap((v) => [v, encodeURIComponent(v), new URLSearchParams({ v }).toString().slice(2)]),
  );
  return [...forms].filter((v) => v.length >= min).sort((a, b) => b.length - a.length);
}

/** The text with each of the secrets replaced by the mask. */
export function redact(text: string, secrets: readonly string[]): string {
  return secrets.reduce((out, secret) => out.split(secret).join(SECRET_MASK), text);
}

/**
 * Like redact, for an excerpt of a longer text (the last kilobytes of a server's stderr): a
 * secret the excerpt cut in two, at its start or at its end, is blanked too, as is every whole
 * one. Redact before cutting a text shorter: a cut made first could leave a piece of a secret
 * that no longer matches it.
 */
export function redactExcerpt(text: string, secrets: readonly string[]): string {
  let out = redact(text, secrets);
  for (const secret of secrets) {
    for (let n = secret.length - 1; n >= MIN_SECRET_LENGTH; n--) {
      if (out.startsWith(secret.slice(-n))) {
        out = SECRET_MASK + out.slice(n);
        break;
      }
    }
    for (let n = secret.length - 1; n >= MIN_SECRET_LENGTH; n--) {
      if (out.endsWith(secret.slice(0, n))) {
        out = out.slice(0, -n) + SECRET_MASK;
        break;
      }
    }
  }
  return out;
}
