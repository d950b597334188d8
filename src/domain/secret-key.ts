import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Config, parseSecretKey } from '../config.ts';
import type { Queryable } from '../db/db.ts';
import { initMeta } from '../db/sql/service-meta.ts';
import { createFileDurably } from '../lib/durable-file.ts';
import type { SecretBox } from '../lib/secret-box.ts';

export class StartupError extends Error {
  override name = 'StartupError';
}

/**
 * The key that seals secrets at rest. With DATABASE_URL it must be configured (several
 * processes must share it); the embedded database keeps a generated one beside its data.
 */
export function resolveSecretKey(config: Pick<Config, 'secretKey' | 'dataDir'>): Buffer {
  if (config.secretKey) return config.secretKey;
  if (config.dataDir.startsWith('memory://')) return randomBytes(32);
  const path = join(config.dataDir, 'secret.key');
  if (existsSync(path)) return parseSecretKey(readFileSync(path, 'utf8').trim(), path);
  // Only the service's user may enter it (stdio servers run as another user when it is root).
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  createFileDurably(path, `${key.toString('base64')}\n`, 0o600);
  return key;
}

const CHECK_KEY = 'secret_key_check';
const CHECK_PLAINTEXT = 'scheduled-ai-task-service secret key check';
const CHECK_AAD = 'service:secret_key_check';

/**
 * Proves at boot that the key is the one this database's secrets were sealed with; a wrong key
 * would otherwise surface later as undecryptable secrets.
 */
export async function verifySecretKey(db: Queryable, box: SecretBox): Promise<void> {
  const stored = await initMeta(db, CHECK_KEY, box.encrypt(CHECK_PLAINTEXT, CHECK_AAD));
  let ok = false;
  try {
    ok = box.decrypt(stored, CHECK_AAD) === CHECK_PLAINTEXT;
  } catch {
    ok = false;
  }
  if (!ok) {
    throw new StartupError(
      'SVC_SECRET_KEY is not the key this database was created with; secrets cannot be decrypted',
    );
  }
}
