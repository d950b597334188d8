import { hash, randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API key format: `sats_` + 30 base62 characters of randomness (about 178 bits) + 6 base62
 * characters of CRC-32 over the random part. The prefix lets secret scanners find leaked keys;
 * the checksum lets us refuse mistyped or made-up keys before any database work. Only the
 * SHA-256 of the whole key is stored.
 */
export const KEY_PREFIX = 'sats_';
const BODY_LENGTH = 30;
const CHECKSUM_LENGTH = 6;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_RE = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);
/** How much of a key is kept in clear, to let people tell their keys apart. */
export const DISPLAY_PREFIX_LENGTH = KEY_PREFIX.length + 6;

function base62(n: number, width: number): string {
  let out = '';
  let v = n;
  for (let i = 0; i < width; i++) {
    out = ALPHABET[v % 62] + out;
    v = Math.floor(v / 62);
  }
  return out;
}

function checksum(body: string): string {
  return base62(crc32(body), CHECKSUM_LENGTH);
}

export function generateApiKey(): string {
  let body = '';
  for (let i = 0; i < BODY_LENGTH; i++) body += ALPHABET[randomInt(62)];
  return `${KEY_PREFIX}${body}${checksum(body)}`;
}

/** True when the value has the shape of one of our keys and its checksum matches. */
export function isWellFormedApiKey(value: string): boolean {
  if (!KEY_RE.test(value)) return false;
  const body = value.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH);
  return checksum(body) === value.slice(KEY_PREFIX.length + BODY_LENGTH);
}

export function hashApiKey(value: string): string {
  return hash('sha256', value, 'hex');
}

export function displayPrefix(value: string): string {
  return value.slice(0, DISPLAY_PREFIX_LENGTH);
}
