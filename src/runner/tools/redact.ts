// Messages about a source (failed connections, failed calls) go to run errors, test answers and
// the model; none may show a secret of the source. These helpers blank them out.
import { SECRET_MASK } from '../../schemas/source.ts';
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
  const forms = new Set(
    raw.flatMap((v) => [v, encodeURIComponent(v), new URLSearchParams({ v }).toString().slice(2)]),
  );
  return [...forms].filter((v) => v.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
}

/** The text with each of the secrets replaced by the mask. */
export function redact(text: string, secrets: readonly string[]): string {
  return secrets.reduce((out, secret) => out.split(secret).join(SECRET_MASK), text);
}
