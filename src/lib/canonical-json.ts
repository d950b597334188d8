import { createHash } from 'node:crypto';

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
  if (Array.isArray(value)) return `[${value.map((item) => sorted(item) ?? 'null').join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const members: string[] = [];
    for (const key of Object.keys(value).sort()) {
      const member = sorted((value as Record<string, unknown>)[key]);
      if (member !== undefined) members.push(`${JSON.stringify(key)}:${member}`);
    }
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
