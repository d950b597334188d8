import type { Queryable } from '../db.ts';
import type { LimitOverrides, Plan } from './plan-types.ts';

export interface ApiKeyRow {
  id: string;
  organization_id: string;
  name: string;
  display_prefix: string;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
  created_by_user_id: string | null;
  /** The creator's e-mail (null when the key was not created by a user, or the user is gone). */
  created_by_email: string | null;
}

const KEY_COLUMNS = `id, organization_id, name, display_prefix, created_at, expires_at, revoked_at, last_used_at,
  created_by_user_id,
  (SELECT u.email FROM users u WHERE u.id = api_keys.created_by_user_id) AS created_by_email`;

export async function insertApiKey(
  db: Queryable,
  row: {
    id: string;
    organizationId: string;
    name: string;
    keyHash: string;
    displayPrefix: string;
    expiresAt: Date | null;
    createdByUserId: string | null;
    now: Date;
  },
): Promise<ApiKeyRow> {
  const [key] = await db.query<ApiKeyRow>(
    `INSERT INTO api_keys (id, organization_id, name, key_hash, display_prefix, expires_at, created_at, created_by_user_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${KEY_COLUMNS}`,
    [
      row.id,
      row.organizationId,
      row.name,
      row.keyHash,
      row.displayPrefix,
      row.expiresAt,
      row.now,
      row.createdByUserId,
    ],
  );
  if (!key) throw new Error('insert returned no row');
  return key;
}

export function listApiKeys(db: Queryable, organizationId: string): Promise<ApiKeyRow[]> {
  return db.query<ApiKeyRow>(
    `SELECT ${KEY_COLUMNS} FROM api_keys WHERE organization_id = $1 ORDER BY created_at DESC, id`,
    [organizationId],
  );
}

/** The organization's keys that are not revoked (expired ones included). */
export async function unrevokedApiKeyCount(db: Queryable, organizationId: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM api_keys WHERE organization_id = $1 AND revoked_at IS NULL',
    [organizationId],
  );
  return row?.n ?? 0;
}

/**
 * Revoked keys an organization keeps, the latest revoked: the rest are deleted. A key revoked
 * is refused whether its row is kept or not (unknown instead of revoked once deleted), and
 * without a bound the cycle create, revoke would grow the organization's key list, which the
 * dashboard and the admin API show whole, without end.
 */
export const MAX_REVOKED_KEYS_KEPT = 100;

/**
 * Marks a key revoked (idempotent: the first revocation time is kept) and deletes its
 * organization's revoked keys beyond the latest MAX_REVOKED_KEYS_KEPT, this one counted.
 */
export async function revokeApiKey(db: Queryable, id: string, now: Date): Promise<ApiKeyRow | undefined> {
  const [key] = await db.query<ApiKeyRow>(
    `WITH revoked AS (
       UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1 RETURNING ${KEY_COLUMNS}
     ), pruned AS (
       -- The statement's snapshot is from before the UPDATE: the key revoked here is left out
       -- by its id, whether it was revoked before or not.
       DELETE FROM api_keys k
        WHERE k.organization_id = (SELECT organization_id FROM revoked)
          AND k.revoked_at IS NOT NULL AND k.id <> $1
          AND k.id NOT IN (SELECT x.id FROM api_keys x
                            WHERE x.organization_id = (SELECT organization_id FROM revoked)
                              AND x.revoked_at IS NOT NULL AND x.id <> $1
                            ORDER BY x.revoked_at DESC, x.id DESC LIMIT $3)
     )
     SELECT * FROM revoked`,
    [id, now, MAX_REVOKED_KEYS_KEPT - 1],
  );
  return key;
}

export interface KeyLookupRow {
  key_id: string;
  organization_id: string;
  revoked_at: Date | null;
  expires_at: Date | null;
  last_used_at: Date | null;
  plan: Plan;
  limit_overrides: LimitOverrides;
}

/** A key by its hash, with what authorizing a request needs of its organization. */
export async function findKeyByHash(db: Queryable, keyHash: string): Promise<KeyLookupRow | null> {
  const [row] = await db.query<KeyLookupRow>(
    `SELECT k.id AS key_id, k.organization_id, k.revoked_at, k.expires_at, k.last_used_at,
            o.plan, o.limit_overrides
       FROM api_keys k JOIN organizations o ON o.id = k.organization_id
      WHERE k.key_hash = $1`,
    [keyHash],
  );
  return row ?? null;
}

/** Records that a key was used (callers do it at most once a minute per key). */
export async function touchApiKey(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query(
    `UPDATE api_keys SET last_used_at = $2
      WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - interval '1 minute')`,
    [id, now],
  );
}
