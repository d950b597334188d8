// OAuth sign-ins of sources (migration 0018): the sealed connection of each connected source
// and the pending sign-ins (state, PKCE verifier) the callback completes.
import type { Queryable } from '../db.ts';

export type SourceOAuthStatus = 'connected' | 'expired';

export interface SourceOAuthRow {
  source_id: string;
  organization_id: string;
  /** Sealed OAuthConnection (domain/source-oauth.ts). */
  sealed: string;
  status: SourceOAuthStatus;
  access_expires_at: Date | null;
  version: number;
  failure: string | null;
  refresh_lease_until: Date | null;
  updated_at: Date;
}

export interface SourceOAuthStateRow {
  organization_id: string;
  source_id: string;
  sealed: string;
  expires_at: Date;
}

export async function findSourceOAuth(
  db: Queryable,
  organizationId: string,
  sourceId: string,
): Promise<SourceOAuthRow | undefined> {
  const [row] = await db.query<SourceOAuthRow>(
    'SELECT * FROM source_oauth WHERE organization_id = $1 AND source_id = $2',
    [organizationId, sourceId],
  );
  return row;
}

/**
 * Stores a completed sign-in (a new connection replaces the old one whole) and marks the source
 * active and connected now.
 */
export async function saveConnectedSourceOAuth(
  db: Queryable,
  row: { organizationId: string; sourceId: string; sealed: string; accessExpiresAt: Date | null; now: Date },
): Promise<void> {
  await db.query(
    `WITH saved AS (
       INSERT INTO source_oauth (source_id, organization_id, sealed, status, access_expires_at, version, failure, updated_at)
       SELECT s.id, s.organization_id, $3, 'connected', $4, 1, NULL, $5 FROM sources s
        WHERE s.organization_id = $1 AND s.id = $2
       ON CONFLICT (source_id) DO UPDATE
         SET sealed = EXCLUDED.sealed, status = 'connected', access_expires_at = EXCLUDED.access_expires_at,
             version = source_oauth.version + 1, failure = NULL, updated_at = EXCLUDED.updated_at,
             refresh_lease_until = NULL
       RETURNING source_id)
     UPDATE sources SET is_active = true, last_connected_at = $5, updated_at = $5
      WHERE id IN (SELECT source_id FROM saved)`,
    [row.organizationId, row.sourceId, row.sealed, row.accessExpiresAt, row.now],
  );
}

/**
 * Stores refreshed tokens, only over the version they were refreshed from: false when another
 * process stored newer tokens meanwhile (its tokens are then the ones to use).
 */
export async function saveRefreshedSourceOAuth(
  db: Queryable,
  row: { sourceId: string; version: number; sealed: string; accessExpiresAt: Date | null; now: Date },
): Promise<boolean> {
  const updated = await db.query(
    `WITH saved AS (
       UPDATE source_oauth SET sealed = $3, access_expires_at = $4, version = version + 1, updated_at = $5,
              refresh_lease_until = NULL
        WHERE source_id = $1 AND version = $2 AND status = 'connected' RETURNING source_id)
     UPDATE sources SET is_active = true, last_connected_at = $5, updated_at = $5
      WHERE id IN (SELECT source_id FROM saved) RETURNING id`,
    [row.sourceId, row.version, row.sealed, row.accessExpiresAt, row.now],
  );
  return updated.length > 0;
}

/**
 * Marks the connection expired and the source inactive, only if it was still connected at the
 * version the failed refresh read: true for the one caller that made the change (and tells
 * the destinations), false for every other.
 */
export async function expireSourceOAuth(
  db: Queryable,
  row: { sourceId: string; version: number; failure: string; now: Date },
): Promise<boolean> {
  const updated = await db.query(
    `WITH expired AS (
       UPDATE source_oauth SET status = 'expired', failure = $3, updated_at = $4, refresh_lease_until = NULL
        WHERE source_id = $1 AND version = $2 AND status = 'connected' RETURNING source_id)
     UPDATE sources SET is_active = false, updated_at = $4
      WHERE id IN (SELECT source_id FROM expired) RETURNING id`,
    [row.sourceId, row.version, row.failure, row.now],
  );
  return updated.length > 0;
}

/**
 * Takes the right to refresh the connection at `version` until `until`: false while another
 * process holds it (or once the version moved on). Saving or expiring the tokens ends it.
 */
export async function claimSourceOAuthRefresh(
  db: Queryable,
  row: { sourceId: string; version: number; now: Date; until: Date },
): Promise<boolean> {
  const claimed = await db.query(
    `UPDATE source_oauth SET refresh_lease_until = $4
      WHERE source_id = $1 AND version = $2 AND status = 'connected'
        AND (refresh_lease_until IS NULL OR refresh_lease_until <= $3) RETURNING source_id`,
    [row.sourceId, row.version, row.now, row.until],
  );
  return claimed.length > 0;
}

/** Gives the right to refresh back (a refresh that failed for want of an answer). */
export async function releaseSourceOAuthRefresh(
  db: Queryable,
  sourceId: string,
  version: number,
): Promise<void> {
  await db.query('UPDATE source_oauth SET refresh_lease_until = NULL WHERE source_id = $1 AND version = $2', [
    sourceId,
    version,
  ]);
}

/** A source's pending sign-ins beyond one are dropped: starting a new one replaces the old. */
export async function insertSourceOAuthState(
  db: Queryable,
  row: SourceOAuthStateRow & { state_hash: string; now: Date },
): Promise<void> {
  await db.query('DELETE FROM source_oauth_states WHERE source_id = $1 OR expires_at <= $2', [
    row.source_id,
    row.now,
  ]);
  await db.query(
    `INSERT INTO source_oauth_states (state_hash, organization_id, source_id, sealed, expires_at, created_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [row.state_hash, row.organization_id, row.source_id, row.sealed, row.expires_at, row.now],
  );
}

/** Reads and deletes a pending sign-in in one statement: a state is used once, whatever happens next. */
export async function takeSourceOAuthState(
  db: Queryable,
  stateHash: string,
): Promise<SourceOAuthStateRow | undefined> {
  const [row] = await db.query<SourceOAuthStateRow>(
    `DELETE FROM source_oauth_states WHERE state_hash = $1
     RETURNING organization_id, source_id, sealed, expires_at`,
    [stateHash],
  );
  return row;
}
