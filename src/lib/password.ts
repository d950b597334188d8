import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Password hashing with scrypt (memory-hard): N = 2^15, r = 8, p = 1, a 16-byte random salt and
 * a 64-byte key, stored as `scrypt$N$r$p$saltB64$hashB64`. scrypt runs on libuv's thread pool,
 * so hashing does not block the event loop. The parameters are stored with each hash, so they
 * can be raised later without invalidating the hashes already stored.
 */
const N = 2 ** 15;
const R = 8;
const P = 1;
const KEY_LENGTH = 64;
const SALT_LENGTH = 16;
/** scrypt needs about 128·N·r bytes (32 MiB here); Node's default cap is exactly 32 MiB, too tight. */
const maxmemFor = (n: number, r: number, p: number) => 128 * r * (n + p + 2) + 1024 * 1024;

/** Parameters accepted when verifying, so a damaged stored value cannot make a request eat the machine. */
const MAX_N = 2 ** 20;
const MAX_R = 32;
const MAX_P = 16;

function scryptAsync(
  password: string,
  salt: Buffer,
  keyLength: number,
  options: ScryptOptions,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, keyLength, options, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const key = await scryptAsync(password, salt, KEY_LENGTH, { N, r: R, p: P, maxmem: maxmemFor(N, R, P) });
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

interface Encoded {
  n: number;
  r: number;
  p: number;
  salt: Buffer;
  hash: Buffer;
}

function decode(encoded: string): Encoded | undefined {
  const parts = encoded.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return undefined;
  const [n, r, p] = [parts[1], parts[2], parts[3]].map((x) => (x && /^\d{1,8}$/.test(x) ? Number(x) : 0));
  if (!n || !r || !p || n > MAX_N || r > MAX_R || p > MAX_P || (n & (n - 1)) !== 0) return undefined;
  const salt = Buffer.from(parts[4] ?? '', 'base64');
  const hash = Buffer.from(parts[5] ?? '', 'base64');
  if (salt.length < 8 || hash.length < 16 || hash.length > 128) return undefined;
  return { n, r, p, salt, hash };
}

/** Whether `password` matches the stored `encoded` hash; compared in constant time. */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const parsed = decode(encoded);
  if (!parsed) return false;
  const { n, r, p, salt, hash } = parsed;
  const key = await scryptAsync(password, salt, hash.length, { N: n, r, p, maxmem: maxmemFor(n, r, p) });
  return timingSafeEqual(key, hash);
}

/**
 * A hash that no password is expected to match (its key is zeroes), with the current
 * parameters: verifying against it costs what a real verification costs.
 */
const DUMMY_HASH = `scrypt$${N}$${R}$${P}$${Buffer.alloc(SALT_LENGTH, 7).toString('base64')}$${Buffer.alloc(KEY_LENGTH).toString('base64')}`;

/**
 * Spends the time of one verification and answers false. For a sign-in with an unknown e-mail,
 * so the answer's timing does not reveal whether an account exists.
 */
export async function dummyVerifyPassword(password: string): Promise<false> {
  await verifyPassword(password, DUMMY_HASH);
  return false;
}
