import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Authenticated encryption of secrets at rest: AES-256-GCM with a fresh 96-bit nonce per
 * value. The associated data binds a ciphertext to its owner and field (for example
 * `org:<id>:webhook_secret`), so a ciphertext copied into another row fails to decrypt.
 * Format: `v1.<base64url(nonce | ciphertext | tag)>`.
 */
export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('secret key must be 32 bytes');
    this.#key = key;
  }

  encrypt(plaintext: string, associatedData: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, nonce);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `v1.${Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64url')}`;
  }

  /** Throws when the value was not sealed with this key and this associated data. */
  decrypt(sealed: string, associatedData: string): string {
    if (!sealed.startsWith('v1.')) throw new Error('unknown secret format');
    const raw = Buffer.from(sealed.slice(3), 'base64url');
    if (raw.length < 12 + 16) throw new Error('secret too short');
    const decipher = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(raw.subarray(raw.length - 16));
    return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString(
      'utf8',
    );
  }
}
