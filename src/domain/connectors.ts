// Connector sources (`authType: connector`) on the service's side of the seam: starting a
// sign-in at the provider (POST /sources/{id}/connect), the callback the provider sends the
// person back to, and keeping `connectorConnected` true to what the provider says.
//
// When the state is refreshed: at the callback and at every connection of the source (a run, a
// connection test) always; when the dashboard shows the source, at most once a minute per
// source and process (STATE_MAX_AGE_MS). A plain API read shows the stored state.

import { recordConnectorState } from '../db/sql/connectors.ts';
import { findSource, type SourceRow } from '../db/sql/sources.ts';
import { setBounded } from '../lib/bounded-map.ts';
import { errors } from '../lib/errors.ts';
import { connectorProvider, connectorSubject } from './connector/provider.ts';
import {
  type ConnectorAccount,
  ConnectorError,
  type ConnectorProvider,
  type ConnectorSubject,
  type ConnectorToolkit,
  NOT_CONFIGURED_MESSAGE,
} from './connector/types.ts';
import type { Deps } from './deps.ts';

/** A refresh for a page view reuses a state this young. */
const STATE_MAX_AGE_MS = 60_000;
/** Sources whose last refresh this process remembers. */
const STATE_CACHE_ENTRIES = 10_000;
/** A callback link works this long after the connect that made it. */
const CALLBACK_LIFETIME_MS = 60 * 60_000;
const CALLBACK_AAD = 'connector-callback';
/**
 * A sign-in start (its requests together) gives up after this long, and a state refresh after
 * half of it: a person waits for either.
 */
export const CONNECT_DEADLINE_MS = 30_000;
/** The public path the provider sends the person back to. */
export const CALLBACK_PATH = '/api/svc/connectors/callback';

type Row = Pick<SourceRow, 'id' | 'organization_id' | 'name' | 'auth_type' | 'auth_config'>;

/** The toolkit a connector source names (authConfig.provider), lowercase; undefined when unset. */
export function connectorToolkitOf(row: Pick<SourceRow, 'auth_config'>): string | undefined {
  const toolkit = row.auth_config?.provider?.trim().toLowerCase();
  return toolkit ? toolkit : undefined;
}

export const NO_TOOLKIT_MESSAGE =
  'a connector source names its toolkit in authConfig.provider (for example "github"); set it with a PATCH';

/** The provider, or the 503 of a service without one. */
function providerOf(deps: Pick<Deps, 'config'>): ConnectorProvider {
  const provider = connectorProvider(deps.config);
  if (!provider) throw errors.connectorNotConfigured(NOT_CONFIGURED_MESSAGE);
  return provider;
}

/** A provider failure as an API error: setup problems are 503 not configured, the rest 503 retry. */
function apiError(err: unknown, source: Row): never {
  if (!(err instanceof ConnectorError)) throw err;
  const message = `source "${source.name}": ${err.message}`;
  if (err.kind === 'not_configured' || err.kind === 'refused')
    throw errors.connectorNotConfigured(message, err);
  throw errors.unavailable(message, 30, err);
}

function subjectOf(source: Row): ConnectorSubject {
  const toolkit = connectorToolkitOf(source);
  if (!toolkit) throw errors.conflict(`source "${source.name}": ${NO_TOOLKIT_MESSAGE}`);
  return connectorSubject(source.organization_id, source.id, toolkit);
}

/** The sealed `state` of a callback link: which source, until when. */
export function sealCallbackState(
  deps: Pick<Deps, 'secretBox' | 'clock'>,
  source: Pick<SourceRow, 'id' | 'organization_id'>,
): string {
  const until = deps.clock.now().getTime() + CALLBACK_LIFETIME_MS;
  return deps.secretBox.encrypt(
    JSON.stringify({ o: source.organization_id, s: source.id, u: until }),
    CALLBACK_AAD,
  );
}

function openCallbackState(
  deps: Pick<Deps, 'secretBox' | 'clock'>,
  state: string,
): { organizationId: string; sourceId: string } {
  const refused = () =>
    errors.validation('The callback link is not one this service gave out, or it expired; connect again', [
      { path: '/query/state', message: 'is not a valid connection state' },
    ]);
  let parsed: { o?: unknown; s?: unknown; u?: unknown };
  try {
    parsed = JSON.parse(deps.secretBox.decrypt(state, CALLBACK_AAD));
  } catch {
    throw refused();
  }
  if (typeof parsed.o !== 'string' || typeof parsed.s !== 'string' || typeof parsed.u !== 'number')
    throw refused();
  if (parsed.u < deps.clock.now().getTime()) throw refused();
  return { organizationId: parsed.o, sourceId: parsed.s };
}

/** POST /sources/{id}/connect of a connector source: the provider's sign-in URL to open. */
export async function startConnectorConnect(deps: Deps, source: Row): Promise<{ url: string }> {
  const provider = providerOf(deps);
  const subject = subjectOf(source);
  const callback = `${deps.config.publicUrl}${CALLBACK_PATH}?state=${sealCallbackState(deps, source)}`;
  try {
    return await provider.startConnection(subject, callback, AbortSignal.timeout(CONNECT_DEADLINE_MS));
  } catch (err) {
    apiError(err, source);
  }
}

interface Remembered {
  at: number;
  connected: boolean;
}
const remembered = new Map<string, Remembered>();

/** Stores what the provider said of the source's account (the state cache learns it too). */
export async function recordAccount(
  deps: Pick<Deps, 'db' | 'clock'>,
  source: Row,
  subject: ConnectorSubject,
  account: ConnectorAccount | undefined,
): Promise<void> {
  const connected = account?.connected ?? false;
  const now = deps.clock.now();
  setBounded(remembered, source.id, { at: now.getTime(), connected }, STATE_CACHE_ENTRIES);
  await recordConnectorState(deps.db, source.organization_id, source.id, {
    connected,
    toolkit: account?.toolkit ?? subject.toolkit,
    at: now,
  });
}

/**
 * Asks the provider whether the source's account is connected and stores the answer. With
 * `maxAgeMs`, a state this process learned that recently is taken as it is. Returns undefined
 * (nothing asked, nothing stored) when the source is not a connector source with a toolkit, no
 * provider is configured or the provider did not answer: the stored state then stays.
 */
export async function refreshConnectorState(
  deps: Deps,
  source: Row,
  options: { maxAgeMs?: number } = {},
): Promise<boolean | undefined> {
  const provider = connectorProvider(deps.config);
  const toolkit = connectorToolkitOf(source);
  if (source.auth_type !== 'connector' || !provider || !toolkit) return undefined;
  const known = remembered.get(source.id);
  if (known && options.maxAgeMs !== undefined && deps.clock.now().getTime() - known.at < options.maxAgeMs)
    return known.connected;
  const subject = connectorSubject(source.organization_id, source.id, toolkit);
  try {
    const account = await provider.account(subject, AbortSignal.timeout(CONNECT_DEADLINE_MS / 2));
    await recordAccount(deps, source, subject, account);
    return account?.connected ?? false;
  } catch (err) {
    if (!(err instanceof ConnectorError)) throw err;
    deps.log.warn({ sourceId: source.id, kind: err.kind, err: err.message }, 'connector state not refreshed');
    return undefined;
  }
}

/**
 * Before the dashboard shows a source: what the provider says now, at most once a minute per
 * source and process (a provider that does not answer leaves the stored state, which is shown).
 */
export async function refreshForView(deps: Deps, organizationId: string, sourceId: string): Promise<void> {
  const row = await findSource(deps.db, organizationId, sourceId);
  if (row) await refreshConnectorState(deps, row, { maxAgeMs: STATE_MAX_AGE_MS });
}

/** The provider's toolkits, as the dashboard's form offers them: asked at most once an hour. */
const TOOLKITS_MAX_AGE_MS = 60 * 60_000;
let toolkits: { at: number; list: ConnectorToolkit[] } | undefined;

/**
 * The toolkits the configured provider offers (for the source form's suggestions); empty without
 * a provider or when it does not answer, which the form does without.
 */
export async function offeredToolkits(deps: Deps): Promise<ConnectorToolkit[]> {
  const provider = connectorProvider(deps.config);
  if (!provider) return [];
  const now = deps.clock.now().getTime();
  if (toolkits && now - toolkits.at < TOOLKITS_MAX_AGE_MS) return toolkits.list;
  try {
    toolkits = { at: now, list: await provider.listToolkits(AbortSignal.timeout(CONNECT_DEADLINE_MS)) };
    return toolkits.list;
  } catch (err) {
    if (!(err instanceof ConnectorError)) throw err;
    deps.log.warn({ kind: err.kind, err: err.message }, 'connector toolkits not listed');
    return [];
  }
}

/**
 * The provider sent the person back: the sealed state names the source, whose state is asked
 * afresh. Answers where the person goes next (the source's dashboard page).
 */
export async function completeConnectorCallback(
  deps: Deps,
  state: string,
): Promise<{ sourceId: string; connected: boolean | undefined }> {
  const { organizationId, sourceId } = openCallbackState(deps, state);
  const row = await findSource(deps.db, organizationId, sourceId);
  if (!row) throw errors.notFound('Source');
  return { sourceId, connected: await refreshConnectorState(deps, row) };
}
