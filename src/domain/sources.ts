import {
  deleteSource as deleteSourceRow,
  findSource,
  insertSource,
  listSources as listSourceRows,
  type SourceRow,
  sourceSlugsLike,
  updateSource as updateSourceRow,
} from '../db/sql/sources.ts';
import { type ErrorDetail, errors } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import { isLoaderVariable, LOADER_VARIABLE_MESSAGE, notAllowedMessage } from '../lib/loader-variables.ts';
import { insertWithUniqueSlug, slugify } from '../lib/slug.ts';
import { CREDENTIAL_KEYS, type CredentialKey, SECRET_MASK } from '../schemas/bounds.ts';
import type {
  AuthConfig,
  AuthConfigInput,
  McpTransport,
  Source,
  SourceConfig,
  SourceConfigInput,
  SourceCreateBody,
  SourceType,
  SourceUpdateBody,
} from '../schemas/source.ts';
import type { Deps } from './deps.ts';
import { checkSourceTotals } from './org-caps.ts';
import { assertIfMatch, deleteIfMatch } from './preconditions.ts';

/** The secret values of a source, in clear; only the run engine asks for them. */
export interface SourceSecrets {
  /** config.env, name to value. */
  env: Record<string, string>;
  /** The credentials of authConfig. */
  credentials: Partial<Record<CredentialKey, string>>;
}

/** The associated data that binds a source's sealed secrets to its organization and row. */
const secretsAad = (organizationId: string, sourceId: string) =>
  `source:${organizationId}:${sourceId}:secrets`;

/**
 * Decrypts the secrets of a stored source (for the run engine: spawning a stdio server with
 * its env, authenticating to an http server or an API). Throws when the sealed value was not
 * sealed for this very row (for example a ciphertext copied from another source).
 */
export function openSourceSecrets(
  deps: Pick<Deps, 'secretBox'>,
  row: Pick<SourceRow, 'id' | 'organization_id' | 'secrets_sealed'>,
): SourceSecrets {
  if (!row.secrets_sealed) return { env: {}, credentials: {} };
  const opened = JSON.parse(
    deps.secretBox.decrypt(row.secrets_sealed, secretsAad(row.organization_id, row.id)),
  ) as Partial<SourceSecrets>;
  return { env: opened.env ?? {}, credentials: opened.credentials ?? {} };
}

/** The stored secrets, or undefined when they do not open (sealed for another row, or with another key). */
function tryOpenSourceSecrets(
  deps: Pick<Deps, 'secretBox'>,
  row: Pick<SourceRow, 'id' | 'organization_id' | 'secrets_sealed'>,
): SourceSecrets | undefined {
  try {
    return openSourceSecrets(deps, row);
  } catch {
    return undefined;
  }
}

function sealSecrets(
  deps: Pick<Deps, 'secretBox'>,
  organizationId: string,
  sourceId: string,
  secrets: SourceSecrets,
): string | null {
  if (Object.keys(secrets.env).length === 0 && Object.keys(secrets.credentials).length === 0) return null;
  return deps.secretBox.encrypt(JSON.stringify(secrets), secretsAad(organizationId, sourceId));
}

function maskedUrls(config: SourceConfig): SourceConfig {
  const masked = { ...config };
  for (const key of ['url', 'baseUrl', 'openapiUrl'] as const) {
    const url = withoutUserInfo(masked[key]);
    if (url !== undefined) masked[key] = url;
  }
  return masked;
}

/** The API view of a stored source. The stored config and authConfig hold masks, never secrets. */
export function sourceView(row: SourceRow): Source {
  const source: Source = {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    slug: row.slug,
    type: row.type,
    config: maskedUrls(row.config),
    isActive: row.is_active,
    tools: row.tools ?? [],
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
  if (row.auth_type !== null) source.authType = row.auth_type as Source['authType'];
  if (row.auth_config !== null) source.authConfig = row.auth_config;
  if (row.description !== null) source.description = row.description;
  if (row.icon_url !== null) source.iconUrl = row.icon_url;
  if (row.last_connected_at !== null) source.lastConnectedAt = row.last_connected_at.toISOString();
  if (row.connector_toolkit !== null) source.connectorToolkit = row.connector_toolkit;
  if (row.connector_connected !== null) source.connectorConnected = row.connector_connected;
  return source;
}

const MASK_MISSING = `is ${SECRET_MASK}, the mask of a stored secret, but no value is stored for it; send the value`;
const UNREADABLE =
  'the stored secrets of this source cannot be decrypted (sealed for another source, or with another SVC_SECRET_KEY)';
const MASK_UNREADABLE = `is ${SECRET_MASK}, the mask of a stored secret, but ${UNREADABLE}; send the value`;

/** A secret value of a request: the mask stands for the stored value of the same key. */
function resolveSecret(
  value: string,
  previous: string | undefined,
  path: string,
  details: ErrorDetail[],
): string | undefined {
  if (value !== SECRET_MASK) return value;
  if (previous === undefined) details.push({ path, message: MASK_MISSING });
  return previous;
}

/**
 * A URL's `user:password@` part is a credential: stored in config, it would be shown by every
 * answer and page. It is refused (never echoed) and belongs in authConfig, which is sealed.
 */
const URL_CREDENTIALS =
  'must not hold a user name or password (user:password@); give them in authConfig (authType basic, or a token), which is kept secret';

function hasUserInfo(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.username !== '' || parsed.password !== '';
  } catch {
    // Not a URL at all: a raw `@` before the host still means someone typed a credential.
    return /^[a-z][a-z0-9+.-]*:[\\/]*[^/?#\\]*@/i.test(url);
  }
}

/** A stored URL with its user information blanked (rows saved before such URLs were refused). */
function withoutUserInfo(url: string | undefined): string | undefined {
  if (url === undefined || !hasUserInfo(url)) return url;
  try {
    const parsed = new URL(url);
    parsed.username = SECRET_MASK;
    parsed.password = '';
    return parsed.toString();
  } catch {
    return SECRET_MASK;
  }
}

function protocolOf(url: string): string | undefined {
  try {
    return new URL(url).protocol;
  } catch {
    return undefined;
  }
}

/**
 * The rules per type the schema cannot express. Returns the config to store (with the
 * transport of an mcp source inferred when absent) and its env values, apart.
 */
function prepareConfig(
  deps: Pick<Deps, 'config'>,
  type: SourceType,
  input: SourceConfigInput,
  previousEnv: Record<string, string>,
  details: ErrorDetail[],
  authType: string | null | undefined,
): { config: SourceConfig; env: Record<string, string> } {
  const at = (key: string) => `/body/config/${key}`;
  const { env: envInput, ...config } = input;
  const urlWith = (key: 'url' | 'baseUrl' | 'openapiUrl', protocols: string[], what: string) => {
    const value = config[key];
    if (value === undefined) details.push({ path: at(key), message: `is required for ${what}` });
    else if (hasUserInfo(value)) details.push({ path: at(key), message: URL_CREDENTIALS });
    else if (!protocols.includes(protocolOf(value) ?? '')) {
      details.push({
        path: at(key),
        message: `must be a ${protocols.map((p) => p.replace(':', '')).join(' or ')} URL for ${what}`,
      });
    }
  };

  // A connector source's tools come from its connector provider: it needs no address of its own
  // (what is given is still checked below: no credentials in a URL).
  const rulesOf = authType === 'connector' ? undefined : type;
  if (rulesOf === 'mcp') {
    let transport: McpTransport | undefined = config.transport;
    if (transport === undefined) {
      if (config.command !== undefined) transport = 'stdio';
      else if (config.url !== undefined) transport = 'http';
      else {
        details.push({
          path: at('transport'),
          message: 'is required for mcp sources (or give command for stdio, url for http)',
        });
      }
    }
    if (transport !== undefined) config.transport = transport;
    if (transport === 'stdio') {
      if (config.command === undefined) {
        details.push({ path: at('command'), message: 'is required for the stdio transport' });
      } else if (!deps.config.stdioCommands.includes(config.command)) {
        details.push({
          path: at('command'),
          message:
            deps.config.stdioCommands.length === 0
              ? 'cannot run: this service refuses stdio sources (SVC_STDIO_COMMANDS is empty)'
              : `is not one of the commands this service lets stdio sources run (SVC_STDIO_COMMANDS): ${deps.config.stdioCommands.join(', ')}`,
        });
      }
    } else if (transport === 'http') urlWith('url', ['http:', 'https:'], 'the http transport');
    else if (transport === 'websocket') urlWith('url', ['ws:', 'wss:'], 'the websocket transport');
  } else if (rulesOf === 'api') {
    urlWith('baseUrl', ['http:', 'https:'], 'api sources');
    if (config.openapiUrl !== undefined) urlWith('openapiUrl', ['http:', 'https:'], 'api sources');
  }

  // A URL key the type does not use is stored and shown all the same: no credential in it either.
  for (const key of ['url', 'baseUrl', 'openapiUrl'] as const) {
    const value = config[key];
    if (value !== undefined && hasUserInfo(value) && !details.some((d) => d.path === at(key))) {
      details.push({ path: at(key), message: URL_CREDENTIALS });
    }
  }

  const env: Record<string, string> = {};
  // Only the names the operator allowed for this command (an unknown command was refused above).
  const allowed = config.command === undefined ? undefined : deps.config.stdioEnv.get(config.command);
  if (config.transport === 'stdio' && allowed) {
    for (const name of Object.keys(envInput ?? {})) {
      if (isLoaderVariable(name)) details.push({ path: at(`env/${name}`), message: LOADER_VARIABLE_MESSAGE });
      else if (!allowed.has(name)) {
        details.push({ path: at(`env/${name}`), message: notAllowedMessage(config.command ?? '', allowed) });
      }
    }
  }
  for (const [name, value] of Object.entries(envInput ?? {})) {
    // Own keys only: a name such as `constructor` must not find Object.prototype's member.
    const previous = Object.hasOwn(previousEnv, name) ? previousEnv[name] : undefined;
    const resolved = resolveSecret(value, previous, at(`env/${name}`), details);
    if (resolved !== undefined) env[name] = resolved;
  }
  const names = Object.keys(envInput ?? {});
  const stored: SourceConfig = { ...config };
  if (names.length > 0) stored.env = Object.fromEntries(names.map((n) => [n, SECRET_MASK]));
  return { config: stored, env };
}

/** Splits authConfig into what is stored (credentials masked) and the credentials themselves. */
function prepareAuthConfig(
  input: AuthConfigInput | null,
  previous: SourceSecrets['credentials'],
  details: ErrorDetail[],
): { authConfig: AuthConfig | null; credentials: SourceSecrets['credentials'] } {
  if (input === null) return { authConfig: null, credentials: {} };
  const authConfig: AuthConfig = {};
  const credentials: SourceSecrets['credentials'] = {};
  if (input.headerName !== undefined) authConfig.headerName = input.headerName;
  if (input.prefix !== undefined) authConfig.prefix = input.prefix;
  if (input.provider !== undefined) authConfig.provider = input.provider;
  for (const key of ['authorizationUrl', 'tokenUrl', 'scope'] as const) {
    const value = input[key];
    if (value !== undefined) authConfig[key] = value;
  }
  for (const key of CREDENTIAL_KEYS) {
    const value = input[key];
    if (value === undefined) continue;
    const resolved = resolveSecret(value, previous[key], `/body/authConfig/${key}`, details);
    if (resolved !== undefined) {
      credentials[key] = resolved;
      authConfig[key] = SECRET_MASK;
    }
  }
  return { authConfig, credentials };
}

/** Like a schema failure, the message repeats the first detail and counts the others. */
function throwIfInvalid(details: ErrorDetail[]): void {
  const [first] = details;
  if (!first) return;
  const more = details.length > 1 ? ` (${details.length - 1} more problem(s) in details)` : '';
  throw errors.validation(`${first.path} ${first.message}${more}`, details);
}

export async function createSource(
  deps: Deps,
  organizationId: string,
  body: SourceCreateBody,
): Promise<Source> {
  const details: ErrorDetail[] = [];
  const { config, env } = prepareConfig(deps, body.type, body.config, {}, details, body.authType);
  const { authConfig, credentials } = prepareAuthConfig(body.authConfig ?? null, {}, details);
  if (body.iconUrl !== undefined && hasUserInfo(body.iconUrl)) {
    details.push({ path: '/body/iconUrl', message: URL_CREDENTIALS });
  }
  throwIfInvalid(details);

  const id = newId();
  const now = deps.clock.now();
  const secretsSealed = sealSecrets(deps, organizationId, id, { env, credentials });
  // Under the organization's row lock, so that concurrent creates cannot pass the cap.
  const row = await deps.db.transaction(async (tx) => {
    await checkSourceTotals(tx, organizationId, deps.config.orgCaps);
    return insertWithUniqueSlug({
      explicit: body.slug,
      base: slugify(body.name, 'source'),
      taken: (base) => sourceSlugsLike(tx, organizationId, base),
      conflict: (slug) => errors.conflict(`A source with slug '${slug}' already exists in this organization`),
      insert: (slug) =>
        insertSource(tx, {
          id,
          organization_id: organizationId,
          slug,
          type: body.type,
          name: body.name,
          config,
          auth_type: body.authType ?? null,
          auth_config: authConfig,
          secrets_sealed: secretsSealed,
          description: body.description ?? null,
          icon_url: body.iconUrl ?? null,
          is_active: false,
          now,
        }),
    });
  });
  return sourceView(row);
}

export async function listSources(deps: Deps, organizationId: string): Promise<Source[]> {
  return (await listSourceRows(deps.db, organizationId)).map(sourceView);
}

export async function getSource(deps: Deps, organizationId: string, id: string): Promise<Source> {
  const row = await findSource(deps.db, organizationId, id);
  if (!row) throw errors.notFound('Source');
  return sourceView(row);
}

/**
 * `config` and `authConfig` replace the stored ones whole: env names and credentials left out
 * are removed, and a value that is exactly the mask keeps the stored value of that key.
 */
export async function updateSource(
  deps: Deps,
  organizationId: string,
  id: string,
  body: SourceUpdateBody,
  ifMatch?: string,
): Promise<Source> {
  const row = await deps.db.transaction(async (tx) => {
    const current = await findSource(tx, organizationId, id, { forUpdate: true });
    if (!current) throw errors.notFound('Source');
    assertIfMatch(ifMatch, sourceView(current));

    let config = current.config;
    let authConfig = current.auth_config;
    let secretsSealed = current.secrets_sealed;
    if (body.config !== undefined || body.authConfig !== undefined) {
      // Secrets that do not open are replaced by the values sent now; nothing is kept of them,
      // so a value left out (or sent as the mask) is asked for rather than silently lost.
      const opened = tryOpenSourceSecrets(deps, current);
      const previous = opened ?? { env: {}, credentials: {} };
      const details: ErrorDetail[] = [];
      if (!opened) {
        if (body.config === undefined && Object.keys(current.config.env ?? {}).length > 0) {
          details.push({
            path: '/body/config',
            message: `is required: ${UNREADABLE}; send config with its env values`,
          });
        }
        if (
          body.authConfig === undefined &&
          CREDENTIAL_KEYS.some((k) => current.auth_config?.[k] !== undefined)
        ) {
          details.push({
            path: '/body/authConfig',
            message: `is required: ${UNREADABLE}; send authConfig with its credentials`,
          });
        }
      }
      let env = previous.env;
      let credentials = previous.credentials;
      if (body.config !== undefined) {
        ({ config, env } = prepareConfig(
          deps,
          current.type,
          body.config,
          previous.env,
          details,
          body.authType === undefined ? current.auth_type : body.authType,
        ));
      }
      if (body.authConfig !== undefined) {
        ({ authConfig, credentials } = prepareAuthConfig(body.authConfig, previous.credentials, details));
      }
      if (!opened) for (const d of details) if (d.message === MASK_MISSING) d.message = MASK_UNREADABLE;
      throwIfInvalid(details);
      secretsSealed = sealSecrets(deps, organizationId, id, { env, credentials });
    }

    return updateSourceRow(tx, organizationId, id, {
      name: body.name ?? current.name,
      config,
      auth_type: body.authType === undefined ? current.auth_type : body.authType,
      auth_config: authConfig,
      secrets_sealed: secretsSealed,
      description: body.description === undefined ? current.description : body.description,
      is_active: body.isActive ?? current.is_active,
      now: deps.clock.now(),
    });
  });
  if (!row) throw errors.notFound('Source');
  return sourceView(row);
}

/** Deletes the source; tasks it was attached to lose it (their other sources stay). */
export async function deleteSource(
  deps: Deps,
  organizationId: string,
  id: string,
  ifMatch?: string,
): Promise<void> {
  const deleted = await deleteIfMatch(deps.db, ifMatch, {
    locked: async (tx) => (await findSource(tx, organizationId, id, { forUpdate: true })) ?? undefined,
    view: sourceView,
    remove: (tx) => deleteSourceRow(tx, organizationId, id),
  });
  if (!deleted) throw errors.notFound('Source');
}
