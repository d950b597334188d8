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

/** Marks a key revoked (idempotent: the first revocation time is kept). */
export async function revokeApiKey(db: Queryable, id: string, now: Date): Promise<ApiKeyRow | undefined> {
  const [key] = await db.query<ApiKeyRow>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
    [id, now],
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
