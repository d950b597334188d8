// The stored side of a source's OAuth sign-in: the connection sealed at rest (bound to its
// organization and source), the pending sign-ins the callback completes (state hashed,
// single-use, short-lived), the connection state the API and the dashboard show, and the one
// transition that tells people: a connection that can no longer be refreshed becomes expired,
// its source inactive, and the destinations of the task whose run found it out are told once.
import { createHash, randomBytes } from 'node:crypto';
import {
  expireSourceOAuth,
  findSourceOAuth,
  insertSourceOAuthState,
  type SourceOAuthRow,
  takeSourceOAuthState,
} from '../db/sql/source-oauth.ts';
import type { Deps } from './deps.ts';
import { tellTaskDestinations } from './task-notices.ts';

/** A sign-in must be completed within this long of its start. */
export const OAUTH_STATE_TTL_MS = 10 * 60_000;
/** The callback path under SVC_PUBLIC_URL; its full URL is what operators register. */
export const OAUTH_CALLBACK_PATH = '/oauth/callback';

export const oauthCallbackUrl = (publicUrl: string) =>
  `${publicUrl.replace(/\/+$/, '')}${OAUTH_CALLBACK_PATH}`;

/** A source's sign-in as people see it: never signed in, signed in, or signed out by a failed refresh. */
export type OAuthConnectionState = 'never_connected' | 'connected' | 'expired';

const connectionAad = (organizationId: string, sourceId: string) =>
  `source:${organizationId}:${sourceId}:oauth`;
const pendingAad = (organizationId: string, sourceId: string, stateHash: string) =>
  `source:${organizationId}:${sourceId}:oauth-state:${stateHash}`;

export const hashState = (state: string) => createHash('sha256').update(state).digest('hex');

/** Seals a connection record (any JSON value) for its source. */
export function sealConnection(
  deps: Pick<Deps, 'secretBox'>,
  organizationId: string,
  sourceId: string,
  record: unknown,
): string {
  return deps.secretBox.encrypt(JSON.stringify(record), connectionAad(organizationId, sourceId));
}

/** Opens a stored connection; throws when it was not sealed for this source (or with this key). */
export function openConnection<T>(deps: Pick<Deps, 'secretBox'>, row: SourceOAuthRow): T {
  return JSON.parse(
    deps.secretBox.decrypt(row.sealed, connectionAad(row.organization_id, row.source_id)),
  ) as T;
}

/**
 * Records a sign-in started for a source and returns its `state`: 32 random bytes, of which
 * only the hash is stored. `pending` (the PKCE verifier and what discovery found) is sealed
 * for this state, organization and source.
 */
export async function savePendingSignIn(
  deps: Pick<Deps, 'db' | 'clock' | 'secretBox'>,
  organizationId: string,
  sourceId: string,
  state: string,
  pending: unknown,
): Promise<void> {
  const stateHash = hashState(state);
  const now = deps.clock.now();
  await deps.db.transaction((tx) =>
    insertSourceOAuthState(tx, {
      state_hash: stateHash,
      organization_id: organizationId,
      source_id: sourceId,
      sealed: deps.secretBox.encrypt(
        JSON.stringify(pending),
        pendingAad(organizationId, sourceId, stateHash),
      ),
      expires_at: new Date(now.getTime() + OAUTH_STATE_TTL_MS),
      now,
    }),
  );
}

export const newState = () => randomBytes(32).toString('base64url');

export type TakenSignIn<T> =
  | { ok: true; organizationId: string; sourceId: string; pending: T }
  | { ok: false; reason: 'unknown' | 'expired' };

/** The pending sign-in of a callback's `state`, deleted as it is read (a state works once). */
export async function takePendingSignIn<T>(
  deps: Pick<Deps, 'db' | 'clock' | 'secretBox'>,
  state: string,
): Promise<TakenSignIn<T>> {
  // Bounded before any work: a state this service made is 43 characters.
  if (state.length === 0 || state.length > 200) return { ok: false, reason: 'unknown' };
  const stateHash = hashState(state);
  const row = await takeSourceOAuthState(deps.db, stateHash);
  if (!row) return { ok: false, reason: 'unknown' };
  if (row.expires_at.getTime() <= deps.clock.now().getTime()) return { ok: false, reason: 'expired' };
  try {
    const pending = JSON.parse(
      deps.secretBox.decrypt(row.sealed, pendingAad(row.organization_id, row.source_id, stateHash)),
    ) as T;
    return { ok: true, organizationId: row.organization_id, sourceId: row.source_id, pending };
  } catch {
    return { ok: false, reason: 'unknown' };
  }
}

/** The sign-in state of an oauth source. */
export async function oauthConnectionState(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  sourceId: string,
): Promise<{ state: OAuthConnectionState; failure: string | null }> {
  const row = await findSourceOAuth(deps.db, organizationId, sourceId);
  if (!row) return { state: 'never_connected', failure: null };
  return { state: row.status, failure: row.failure };
}

/**
 * The one transition that tells people: the connection at `version` could not be refreshed.
 * It becomes expired and the source inactive, and the task whose run found it out tells its
 * destinations (`source.disconnected`), all in one transaction, so that of several runs that
 * find it out at once exactly one tells. Returns whether this call made the change.
 */
export async function expireConnection(
  deps: Pick<Deps, 'db' | 'clock'>,
  o: { sourceId: string; sourceName: string; version: number; failure: string; taskId?: string },
): Promise<boolean> {
  return deps.db.transaction(async (tx) => {
    const now = await deps.clock.agreedNow(tx);
    const changed = await expireSourceOAuth(tx, {
      sourceId: o.sourceId,
      version: o.version,
      failure: o.failure,
      now,
    });
    if (changed && o.taskId !== undefined) {
      await tellTaskDestinations(tx, deps.clock, o.taskId, {
        kind: 'source.disconnected',
        payload: { sourceId: o.sourceId, sourceName: o.sourceName, reason: o.failure },
      });
    }
    return changed;
  });
}
