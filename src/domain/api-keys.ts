import type { Queryable } from '../db/db.ts';
import { type ApiKeyRow, insertApiKey, listApiKeys, revokeApiKey } from '../db/sql/api-keys.ts';
import { errors } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import { displayPrefix, generateApiKey, hashApiKey } from './api-key-format.ts';
import type { Deps } from './deps.ts';
import { checkApiKeyTotals } from './org-caps.ts';
import type { Viewer } from './sessions.ts';

export interface ApiKeyView {
  id: string;
  organizationId: string;
  name: string;
  /** The first characters of the key, to tell keys apart; never the whole value. */
  prefix: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  lastUsedAt: string | null;
  /** The user who created the key, when a user did (and still exists). */
  createdBy?: { id: string; email: string };
}

export function apiKeyView(row: ApiKeyRow): ApiKeyView {
  return {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    prefix: row.display_prefix,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at?.toISOString() ?? null,
    revokedAt: row.revoked_at?.toISOString() ?? null,
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
    ...(row.created_by_user_id !== null &&
      row.created_by_email !== null && {
        createdBy: { id: row.created_by_user_id, email: row.created_by_email },
      }),
  };
}

/**
 * Creates a key of an existing organization within its cap of keys not revoked
 * (SVC_MAX_API_KEYS_PER_ORG), checked under the organization's row lock so that concurrent
 * creates cannot pass it. 404 without the organization, 403 at the cap.
 */
export function createCappedApiKey(
  deps: Pick<Deps, 'clock' | 'db' | 'config'>,
  input: { organizationId: string; name: string; expiresAt?: Date | null; createdByUserId?: string | null },
): Promise<{ key: ApiKeyView; apiKey: string }> {
  return deps.db.transaction(async (tx) => {
    await checkApiKeyTotals(tx, input.organizationId, deps.config.orgCaps);
    return createApiKey(deps, tx, input);
  });
}

/**
 * Creates a key without looking at the cap (the first key of an organization being created);
 * the returned `apiKey` value exists nowhere else and is shown once.
 */
export async function createApiKey(
  deps: Pick<Deps, 'clock'>,
  db: Queryable,
  input: { organizationId: string; name: string; expiresAt?: Date | null; createdByUserId?: string | null },
): Promise<{ key: ApiKeyView; apiKey: string }> {
  const apiKey = generateApiKey();
  const row = await insertApiKey(db, {
    id: newId(),
    organizationId: input.organizationId,
    name: input.name,
    keyHash: hashApiKey(apiKey),
    displayPrefix: displayPrefix(apiKey),
    expiresAt: input.expiresAt ?? null,
    createdByUserId: input.createdByUserId ?? null,
    now: deps.clock.now(),
  });
  return { key: apiKeyView(row), apiKey };
}

export async function listOrganizationKeys(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
): Promise<ApiKeyView[]> {
  return (await listApiKeys(deps.db, organizationId)).map(apiKeyView);
}

/** Revokes a key; every api process refuses it from its next request on. */
export async function revokeKey(
  deps: Pick<Deps, 'db' | 'clock' | 'principals'>,
  keyId: string,
): Promise<ApiKeyView | undefined> {
  const row = await revokeApiKey(deps.db, keyId, deps.clock.now());
  if (row) await deps.principals.changed();
  return row && apiKeyView(row);
}

/**
 * Who may revoke a key of their organization from the dashboard (the operator revokes any key
 * through the admin API or the CLI): the owner any of them; a member only the keys they
 * created, so a member cannot cut off the owner's programs or the keys the operator issued.
 */
export function mayRevoke(
  viewer: Pick<Viewer, 'userId' | 'role'>,
  key: Pick<ApiKeyRow, 'created_by_user_id'>,
) {
  return viewer.role === 'owner' || key.created_by_user_id === viewer.userId;
}

/** The keys of the viewer's organization, each with whether the viewer may revoke it. */
export async function keysForViewer(
  deps: Pick<Deps, 'db'>,
  viewer: Pick<Viewer, 'organizationId' | 'userId' | 'role'>,
): Promise<(ApiKeyView & { revocable: boolean })[]> {
  const rows = await listApiKeys(deps.db, viewer.organizationId);
  return rows.map((row) => ({ ...apiKeyView(row), revocable: mayRevoke(viewer, row) }));
}

/** Revokes a key of the viewer's organization, if the viewer's role allows it. */
export async function revokeKeyAs(
  deps: Pick<Deps, 'db' | 'clock' | 'principals'>,
  viewer: Pick<Viewer, 'organizationId' | 'userId' | 'role'>,
  keyId: string,
): Promise<ApiKeyView> {
  const id = keyId.toLowerCase();
  const row = (await listApiKeys(deps.db, viewer.organizationId)).find((k) => k.id === id);
  if (!row) throw errors.notFound('API key');
  if (!mayRevoke(viewer, row)) {
    throw errors.forbidden(
      "A member can revoke only the keys they created; the organization's owner can revoke the others",
    );
  }
  const revoked = await revokeKey(deps, row.id);
  if (!revoked) throw errors.notFound('API key');
  return revoked;
}
