// The fetch of an oauth source's connection: every request it makes, at connect time and
// after (the MCP transport's POSTs and event streams, an api source's tool requests), carries
// the newest access token of the run, and a 401 to a request that carried it gets one refresh
// (source-oauth.ts: the lease, the versioning, a newer token another run got) and one more try.
// A refresh that fails is kept (the first one) so the run can end with it; no second refresh
// is asked for after it, and no request is tried more than twice.
import type { FetchLike } from '../lib/outbound.ts';
import type { AccessToken } from './source-oauth.ts';

type Ready = Extract<AccessToken, { ok: true }>;
export type LostSignIn = Extract<AccessToken, { ok: false }>;

export interface SignedInFetch {
  fetch: FetchLike;
  /** The refresh that failed, if one did. */
  readonly lost: LostSignIn | undefined;
}

/** A body that can be sent again as it is (a stream is read by the first send). */
const replayable = (body: RequestInit['body']): boolean =>
  body === undefined ||
  body === null ||
  typeof body === 'string' ||
  body instanceof URLSearchParams ||
  body instanceof ArrayBuffer ||
  ArrayBuffer.isView(body);

/**
 * `headerName` is where the source sends its token (authConfig.headerName, default
 * Authorization); the token is found and swapped inside its value, whatever the prefix.
 */
export function signedInFetch(
  base: FetchLike,
  first: Ready,
  headerName: string,
  onLost?: (lost: LostSignIn) => void,
): SignedInFetch {
  let current = first;
  /** Tokens this connection was given before `current`: a header still carrying one gets the newest. */
  const older: string[] = [];
  let renewing: Promise<Ready | undefined> | undefined;
  let lost: LostSignIn | undefined;

  /** The token after `used`: the one a request already got, or one refresh shared by all. */
  const renew = (used: Ready): Promise<Ready | undefined> => {
    if (current !== used) return Promise.resolve(current);
    if (lost) return Promise.resolve(undefined);
    renewing ??= used
      .refresh()
      .then((next) => {
        if (!next.ok) {
          if (!lost) {
            lost = next;
            onLost?.(next);
          }
          return undefined;
        }
        if (next.token !== current.token) older.push(current.token);
        current = next;
        return next;
      })
      .finally(() => {
        renewing = undefined;
      });
    return renewing;
  };

  const swap = (value: string, to: string): string => {
    for (const old of older) if (value.includes(old)) return value.split(old).join(to);
    return value;
  };

  const fetch: FetchLike = async (input, init) => {
    const used = current;
    const headers = new Headers(init?.headers);
    const sent = headers.get(headerName);
    if (sent === null) return base(input, init);
    const value = swap(sent, used.token);
    headers.set(headerName, value);
    const response = await base(input, { ...init, headers });
    if (
      response.status !== 401 ||
      !value.includes(used.token) ||
      !replayable(init?.body) ||
      init?.signal?.aborted
    )
      return response;
    const next = await renew(used);
    // No token past the refused one: the caller reads the 401 as it came.
    if (!next || next.token === used.token) return response;
    await response.body?.cancel().catch(() => {});
    headers.set(headerName, value.split(used.token).join(next.token));
    return base(input, { ...init, headers });
  };

  return {
    fetch,
    get lost() {
      return lost;
    },
  };
}
