// The SSRF guard: every URL the service reaches on a user's behalf (http and websocket MCP
// sources, api sources, the fetch tool, webhooks) goes through here. Unless the operator sets
// SVC_ALLOW_PRIVATE_URLS=true, loopback, private, link-local and other non-public addresses
// are refused. The check runs twice: before the request, on the URL's host (for a clear
// message), and again in the connection's DNS lookup, so a redirect or a DNS answer that
// changes between the two (rebinding) cannot reach a private address either.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Agent, WebSocket as UndiciWebSocket, fetch as undiciFetch } from 'undici';

export interface OutboundPolicy {
  /** SVC_ALLOW_PRIVATE_URLS: let requests reach loopback and private addresses. */
  allowPrivateUrls: boolean;
}

/**
 * A URL the service will not reach; the message is safe to show to the user. `reason` tells a
 * policy refusal from a host that does not resolve (which callers report as unreachable, not
 * as refused).
 */
export class OutboundUrlError extends Error {
  readonly reason: 'refused' | 'unresolvable';
  constructor(message: string, reason: 'refused' | 'unresolvable' = 'refused') {
    super(message);
    this.name = 'OutboundUrlError';
    this.reason = reason;
  }
}

const blocked = new BlockList();
// IPv4: "this network", private, carrier-grade NAT, loopback, link-local, IETF protocol
// assignments, documentation ranges, benchmarking, multicast and reserved, broadcast.
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(net, prefix, 'ipv4');
}
// IPv6: unspecified, loopback, NAT64 of the IPv4 ranges, discard, documentation, unique local,
// link-local, site-local (deprecated), multicast.
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(net, prefix, 'ipv6');
}

/** Whether an IP address (v4 or v6, IPv4-mapped v6 included) is not a public address. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family !== 6) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return blocked.check(mapped[1], 'ipv4');
  return blocked.check(address, 'ipv6');
}

const refusal = (host: string, address: string) =>
  new OutboundUrlError(
    `${host} resolves to ${address}, a private or loopback address, which this service does not reach (the operator can allow it with SVC_ALLOW_PRIVATE_URLS=true)`,
  );

/** URL hosts keep IPv6 literals in brackets. */
const bareHost = (hostname: string) => hostname.replace(/^\[(.*)\]$/, '$1');

/**
 * Checks a URL before a request: its scheme is one of `protocols`, and (unless private
 * addresses are allowed) every address its host resolves to is public. Throws OutboundUrlError.
 */
export async function assertOutboundUrl(
  url: string | URL,
  policy: OutboundPolicy,
  protocols: readonly string[] = ['http:', 'https:'],
): Promise<URL> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new OutboundUrlError(`${String(url).slice(0, 200)} is not a valid URL`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new OutboundUrlError(
      `${parsed.protocol} URLs are not allowed here (only ${protocols.map((p) => p.replace(':', '')).join(', ')})`,
    );
  }
  if (parsed.username || parsed.password) {
    throw new OutboundUrlError(
      'URLs with a user name or password are not allowed; use the source authentication',
    );
  }
  if (policy.allowPrivateUrls) return parsed;
  const host = bareHost(parsed.hostname);
  const addresses = isIP(host)
    ? [host]
    : await new Promise<string[]>((resolve, reject) =>
        dnsLookup(host, { all: true }, (err, found) =>
          err
            ? reject(
                new OutboundUrlError(
                  `${host} could not be resolved (${err.code ?? err.message})`,
                  'unresolvable',
                ),
              )
            : resolve(found.map((a) => a.address)),
        ),
      );
  for (const address of addresses) if (isPrivateAddress(address)) throw refusal(host, address);
  return parsed;
}

/** A DNS lookup for sockets that fails when the host resolves to a non-public address. */
const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, found: LookupAddress[]) => {
    if (err) return callback(err, '', 0);
    const bad = found.find((a) => isPrivateAddress(a.address));
    if (bad) return callback(refusal(hostname, bad.address) as NodeJS.ErrnoException, '', 0);
    if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, found);
    const first = found[0];
    if (!first) return callback(new Error(`${hostname} has no address`) as NodeJS.ErrnoException, '', 0);
    return callback(null, first.address, first.family);
  });
};

let guardedAgent: Agent | undefined;
let openAgent: Agent | undefined;

/**
 * The undici dispatcher for outbound connections under the policy. With private addresses
 * refused, every connection (redirects included) resolves its host through the guard; IP
 * literals skip DNS, so the pre-request check of `assertOutboundUrl` covers them.
 */
export function outboundDispatcher(policy: OutboundPolicy): Agent {
  if (policy.allowPrivateUrls) {
    openAgent ??= new Agent();
    return openAgent;
  }
  guardedAgent ??= new Agent({ connect: { lookup: guardedLookup } });
  return guardedAgent;
}

export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

/**
 * A fetch for user-given URLs: checks the URL, then connects through the guarded dispatcher.
 * Redirects are followed by hand (at most 5) so that each target is checked like the first.
 */
export function outboundFetch(policy: OutboundPolicy): FetchLike {
  return async (input, init = {}) => {
    let url = await assertOutboundUrl(input instanceof URL ? input : String(input), policy);
    let request = init;
    for (let hop = 0; ; hop++) {
      const response = (await undiciFetch(url, {
        ...(request as Parameters<typeof undiciFetch>[1]),
        redirect: 'manual',
        dispatcher: outboundDispatcher(policy),
      })) as unknown as Response;
      const location = response.headers.get('location');
      if (response.status < 300 || response.status > 399 || !location || init.redirect === 'manual') {
        return response;
      }
      if (hop >= 5) throw new OutboundUrlError(`too many redirects from ${url.origin}`);
      await response.body?.cancel();
      const from = url;
      url = await assertOutboundUrl(new URL(location, url), policy);
      // Credentials meant for one origin do not follow a redirect to another (as fetch does
      // for Authorization); a caller with credentials in other headers should not follow
      // redirects across origins at all (redirect: 'manual').
      if (url.origin !== from.origin) {
        const headers = new Headers(request.headers);
        for (const name of ['authorization', 'proxy-authorization', 'cookie']) headers.delete(name);
        request = { ...request, headers };
      }
      // 303 (and 301/302 for a POST, as browsers do) turn into a GET without a body.
      const method = request.method?.toUpperCase();
      if (
        response.status === 303 ||
        ((response.status === 301 || response.status === 302) && method === 'POST')
      ) {
        const { body: _body, ...rest } = request;
        request = { ...rest, method: 'GET' };
      }
    }
  };
}

/** Opens a WebSocket to a user-given URL under the policy, with extra handshake headers. */
export async function openOutboundWebSocket(
  url: string,
  policy: OutboundPolicy,
  options: { protocols?: string[]; headers?: Record<string, string> } = {},
): Promise<WebSocket> {
  const checked = await assertOutboundUrl(url, policy, ['ws:', 'wss:']);
  return new UndiciWebSocket(checked, {
    protocols: options.protocols ?? [],
    headers: options.headers ?? {},
    dispatcher: outboundDispatcher(policy),
  }) as unknown as WebSocket;
}
