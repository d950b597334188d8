// Opens the sources attached to a run (or tested through the API) with their secrets, under
// the service's policy: stdio allowlist, SSRF guard, one connect time limit.
import type { Config } from '../config.ts';
import type { RunSource } from '../db/sql/run-context.ts';
import { recordAccount } from '../domain/connectors.ts';
import type { Deps } from '../domain/deps.ts';
import { openSourceSecrets } from '../domain/sources.ts';
import { outboundFetch } from '../lib/outbound.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import { type LostSignIn, signedInFetch } from './source-oauth-fetch.ts';
import { startsProcess, withStdioSlot } from './stdio-slots.ts';
import { Toolbox } from './toolbox.ts';
import { connectSource } from './tools/connect.ts';
import type { ConnectErrorType, ConnectResult, ToolConnection } from './tools/types.ts';

/** Connecting a source (and listing its tools) gives up after this long, in runs and tests alike. */
export const SOURCE_CONNECT_TIMEOUT_MS = 15_000;

/** db: where an oauth source's sign-in and a connector source's account are read and stored. */
export interface SourceDeps extends Pick<Deps, 'db' | 'clock' | 'log'> {
  config: Config;
  secretBox: SecretBox;
}

/**
 * Connects one stored source. Secrets that fail to open are a value, like any other failure.
 * `onSignInLost` hears of an oauth source whose token a request found refused and whose
 * refresh then failed (after it connected, the run ends with it).
 */
export async function connectStoredSource(
  deps: SourceDeps,
  source: RunSource,
  signal: AbortSignal,
  taskId?: string,
  onSignInLost?: (lost: LostSignIn) => void,
): Promise<ConnectResult> {
  let secrets: ReturnType<typeof openSourceSecrets>;
  try {
    secrets = openSourceSecrets(deps, source);
  } catch {
    return {
      ok: false,
      errorType: 'not_configured',
      message: `the stored credentials of source "${source.name}" cannot be decrypted (was SVC_SECRET_KEY changed?); set them again with a PATCH`,
    };
  }
  // An oauth source's access token comes from its sign-in (refreshed when near its end); every
  // request of the connection, at connect time and after, goes through signedInFetch, where a
  // 401 gets one refresh and one more try. The OAuth client (the MCP SDK's, and zod, which it
  // brings) is loaded by the first run with such a source: a worker without one never holds it.
  const oauth =
    source.auth_type === 'oauth' && sendsAuth(source)
      ? await (await import('./source-oauth.ts')).oauthAccessToken(deps, source, {
          hasOwnToken: secrets.credentials.token !== undefined,
          ...(taskId !== undefined && { taskId }),
        })
      : undefined;
  if (oauth && !oauth.ok) return { ok: false, errorType: oauth.errorType, message: oauth.message };
  if (oauth) secrets = { ...secrets, credentials: { ...secrets.credentials, token: oauth.token } };
  // A refresh that fails at connect time fails the connection (below); one after it, the run.
  const signedIn = oauth
    ? signedInFetch(
        outboundFetch(deps.config),
        oauth,
        source.auth_config?.headerName ?? 'Authorization',
        onSignInLost,
      )
    : undefined;
  const connect = async (): Promise<ConnectResult> => {
    const result = await connectSource(
      {
        id: source.id,
        organizationId: source.organization_id,
        slug: source.slug,
        name: source.name,
        type: source.type,
        config: source.config,
        authType: source.auth_type,
        authConfig: source.auth_config,
        secrets,
      },
      {
        config: deps.config,
        fetch: signedIn?.fetch ?? outboundFetch(deps.config),
        timeoutMs: SOURCE_CONNECT_TIMEOUT_MS,
        signal,
        // Every connection of a connector source keeps its connectorConnected true.
        connectorAccount: (account, subject) => recordAccount(deps, source, subject, account),
      },
    );
    // The refresh a 401 asked for failed: that, not the 401, is what to tell (reconnect...).
    const lost = signedIn?.lost;
    if (!result.ok && lost) return { ok: false, errorType: lost.errorType, message: lost.message };
    return result;
  };
  return startsProcess(source)
    ? withStdioSlot(deps.config, source.organization_id, source.name, connect)
    : connect();
}

/** Whether the source's auth goes over the network (an api, an MCP server not run by us). */
function sendsAuth(source: RunSource): boolean {
  if (source.type === 'api') return true;
  if (source.type !== 'mcp') return false;
  const transport = source.config.transport ?? (source.config.command !== undefined ? 'stdio' : 'http');
  return transport !== 'stdio';
}

export type OpenedSources =
  | {
      ok: true;
      toolbox: Toolbox;
      /** The first oauth sign-in lost during the run (its refresh failed): the run ends with it. */
      lostSignIn(): LostSignIn | undefined;
      close(): Promise<void>;
    }
  | { ok: false; errorType: ConnectErrorType; message: string };

/**
 * Connects every source of a run at once. If one fails, the others are closed and the run
 * fails naming it: a run that silently lacked the tools its prompt relies on would not be
 * trustworthy.
 */
export async function openRunSources(
  deps: SourceDeps,
  sources: readonly RunSource[],
  signal: AbortSignal,
  taskId?: string,
): Promise<OpenedSources> {
  let lost: LostSignIn | undefined;
  const results = await Promise.all(
    sources.map((s) =>
      connectStoredSource(deps, s, signal, taskId, (l) => {
        lost ??= l;
      }),
    ),
  );
  const connections = results.flatMap((r): ToolConnection[] => (r.ok ? [r.connection] : []));
  const close = async () => {
    await Promise.allSettled(connections.map((c) => c.close()));
  };
  const failedAt = results.findIndex((r) => !r.ok);
  const failed = results[failedAt];
  if (failed && !failed.ok) {
    await close();
    const name = sources[failedAt]?.name ?? '';
    const message = failed.message.includes(`"${name}"`)
      ? failed.message
      : `source "${name}": ${failed.message}`;
    return { ok: false, errorType: failed.errorType, message };
  }
  const toolbox = new Toolbox();
  results.forEach((r, i) => {
    const source = sources[i];
    if (r.ok && source) toolbox.add(source, r.connection);
  });
  return { ok: true, toolbox, lostSignIn: () => lost, close };
}
