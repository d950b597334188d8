import type { Queryable } from '../db.ts';

export async function getMeta(db: Queryable, key: string): Promise<string | undefined> {
  const [row] = await db.query<{ value: string }>('SELECT value FROM service_meta WHERE key = $1', [key]);
  return row?.value;
}

/** Sets the value only if the key has none yet; returns the value that is stored. */
export async function initMeta(db: Queryable, key: string, value: string): Promise<string> {
  await db.query('INSERT INTO service_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [
    key,
    value,
  ]);
  const stored = await getMeta(db, key);
  if (stored === undefined) throw new Error(`service_meta ${key} missing after insert`);
  return stored;
}
