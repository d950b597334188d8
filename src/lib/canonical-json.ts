import { hash } from 'node:crypto';

/**
 * JSON with object keys sorted at every level, so two documents that differ only in key order
 * (or whitespace) serialize alike: what an idempotency key's request and an entity tag are
 * compared by. Values follow JSON's rules (dates become strings through toJSON, undefined
 * members vanish, undefined array items become null): the text is that of sorting the keys of
 * JSON.parse(JSON.stringify(value)), built in one walk (a GET's entity tag is computed per
 * request).
 */
export function canonicalJson(value: unknown): string {
  return sorted(value) ?? '';
}

/** The canonical text of a value, or undefined where JSON.stringify leaves a member out. */
function sorted(input: unknown): string | undefined {
  const value =
    input !== null &&
    typeof input === 'object' &&
    typeof (input as { toJSON?: unknown }).toJSON === 'function'
      ? (input as { toJSON(): unknown }).toJSON()
      : input;
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') return undefined;
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  // Built by concatenation, not arrays and joins: a GET's entity tag is computed per request.
  if (Array.isArray(value)) {
    let text = '[';
    for (let i = 0; i < value.length; i++) text += `${i === 0 ? '' : ','}${sorted(value[i]) ?? 'null'}`;
    return `${text}]`;
  }
  let text = '{';
  let first = true;
  for (const key of Object.keys(value).sort()) {
    const member = sorted((value as Record<string, unknown>)[key]);
    if (member === undefined) continue;
    text += `${first ? '' : ','}${JSON.stringify(key)}:${member}`;
    first = false;
  }
  return `${text}}`;
}

/** One call, no Hash object: entity tags and key lookups hash on every request. */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}
