import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every level, so two documents that differ only in key order
 * (or whitespace) serialize alike: what an idempotency key's request and an entity tag are
 * compared by. Values go through JSON first (dates become strings, undefined members vanish).
 */
export function canonicalJson(value: unknown): string {
  const json = JSON.stringify(value);
  return json === undefined ? '' : sorted(JSON.parse(json));
}

function sorted(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sorted).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${sorted((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
