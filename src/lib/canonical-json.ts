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
  const { keys, prefixes } = sortedKeys(Object.keys(value));
  let text = '{';
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const member = sorted((value as Record<string, unknown>)[keys[i] as string]);
    if (member === undefined) continue;
    text += `${first ? '' : ','}${prefixes[i]}${member}`;
    first = false;
  }
  return `${text}}`;
}

/** An object's keys in order, each with its member's prefix (the key as JSON and a colon). */
interface SortedKeys {
  keys: string[];
  prefixes: string[];
}

/**
 * Key lists met before, by their length and first key: the objects tagged per request come from
 * a few views, each of a few shapes, so their keys are sorted and quoted once, not per request.
 * Bounded: past MAX_SHAPES lists (objects from outside, say) keys are sorted each time.
 */
const shapes = new Map<string, { keys: string[]; sorted: SortedKeys }[]>();
const MAX_SHAPES = 512;
let shapeCount = 0;

function sortedKeys(keys: string[]): SortedKeys {
  const id = `${keys.length}:${keys[0] ?? ''}`;
  const known = shapes.get(id);
  if (known) {
    for (const shape of known) if (sameKeys(shape.keys, keys)) return shape.sorted;
  }
  const order = [...keys].sort();
  const result = { keys: order, prefixes: order.map((k) => `${JSON.stringify(k)}:`) };
  if (shapeCount < MAX_SHAPES) {
    shapeCount++;
    if (known) known.push({ keys, sorted: result });
    else shapes.set(id, [{ keys, sorted: result }]);
  }
  return result;
}

function sameKeys(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** One call, no Hash object: entity tags and key lookups hash on every request. */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}
