// The SSRF guard: every URL the service reaches on a user's behalf (http and websocket MCP
// sources, api sources, the fetch tool, webhooks) goes through here. Unless the operator sets
// SVC_ALLOW_PRIVATE_URLS=true, loopback, private, link-local and other non-public addresses
// are refused. The check runs twice: before the request, on the URL's host (for a clear
// message), and again in the connection's DNS lookup, so a redirect or a DNS answer that
// changes between the two (rebinding) cannot reach a private address either.
//
// Test seam: setOutboundNetwork() replaces how host names are resolved (node:dns by default),
// for both checks, so a test can answer one address to the pre-request check and another to
// the connection (rebinding) without any real DNS. It can also name host names under the
// reserved `.test` domain whose answers the guard takes as public, so a loopback server can
// stand in for a public one (a redirect from an allowed origin to a private one). Production
// never calls it, and no other name can be exempted.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { Agent } from 'undici';

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
  constructor(message: string, reason: 'refused' | 'unresolvable' = 'refused', cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'OutboundUrlError';
    this.reason = reason;
  }
}

const blocked = new BlockList();
// IPv4: "this network", private, carrier-grade NAT, loopback, link-local, IETF protocol
// assignments, documentation ranges, benchmarking, multicast and reserved, broadcast.
const BLOCKED_V4 = [
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
] as const;
for (const [net, prefix] of BLOCKED_V4) {
  blocked.addSubnet(net, prefix, 'ipv4');
  // The same range inside a 6to4 address (2002:AABB:CCDD::/48 carries a.b.c.d).
  const [a = 0, b = 0, c = 0, d = 0] = net.split('.').map(Number);
  const hex = (hi: number, lo: number) => ((hi << 8) | lo).toString(16);
  blocked.addSubnet(`2002:${hex(a, b)}:${hex(c, d)}::`, 16 + prefix, 'ipv6');
}
// IPv6: unspecified, loopback and the deprecated IPv4-compatible addresses (::a.b.c.d, which
// some stacks still route to the IPv4 address), IPv4-translated addresses (::ffff:0:a.b.c.d),
// NAT64 of the IPv4 ranges (well-known and local-use prefixes), discard, documentation,
// unique local, link-local, site-local (deprecated), multicast.
for (const [net, prefix] of [
  ['::', 96],
  ['::1', 128],
  ['::ffff:0:0:0', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
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

/** Which of the two checks a name is resolved for. */
export type ResolveUse = 'check' | 'connect';

/** How the guard resolves host names, replaceable in tests (see setOutboundNetwork). */
export interface OutboundNetwork {
  /** Every address of `hostname`; fails with an error carrying a `code` (ENOTFOUND…) when none. */
  resolve(hostname: string, use: ResolveUse): Promise<LookupAddress[]>;
  /**
   * Host names under the reserved `.test` domain (RFC 6761: never in the real DNS) whose
   * addresses are taken as public, whatever they are. Names outside `.test` are ignored.
   */
  publicTestHosts?: readonly string[];
}

let network: OutboundNetwork | undefined;

/**
 * Replaces how the guard resolves host names (undefined restores node:dns). For tests only:
 * the service never calls it. Connections pooled by the dispatcher are kept, so a test should
 * use a host name per scenario.
 */
export function setOutboundNetwork(replacement: OutboundNetwork | undefined): void {
  network = replacement;
}

const normalName = (hostname: string) => hostname.toLowerCase().replace(/\.$/, '');

/** A `.test` host name the test network stands in for a public host. */
function isPublicStandIn(hostname: string): boolean {
  const name = normalName(hostname);
  return name.endsWith('.test') && (network?.publicTestHosts ?? []).some((h) => normalName(h) === name);
}

/** The addresses of a host name: the test network's answer, else node:dns (`options` passed on). */
function resolveHost(
  hostname: string,
  use: ResolveUse,
  options: Record<string, unknown> = {},
): Promise<LookupAddress[]> {
  if (network) return network.resolve(hostname, use);
  return new Promise((resolve, reject) =>
    dnsLookup(hostname, { ...options, all: true }, (err, found: LookupAddress[]) =>
      err ? reject(err) : resolve(found),
    ),
  );
}

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
  if (isIP(host)) {
    if (isPrivateAddress(host)) throw refusal(host, host);
    return parsed;
  }
  let found: LookupAddress[];
  try {
    found = await resolveHost(host, 'check');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new OutboundUrlError(`${host} could not be resolved (${e.code ?? e.message})`, 'unresolvable', err);
  }
  if (found.length === 0)
    throw new OutboundUrlError(`${host} could not be resolved (no address)`, 'unresolvable');
  if (isPublicStandIn(host)) return parsed;
  for (const { address } of found) if (isPrivateAddress(address)) throw refusal(host, address);
  return parsed;
}

/** A DNS lookup for sockets that fails when the host resolves to a non-public address. */
const guardedLookup: LookupFunction = (hostname, options, callback) => {
  const { all, ...rest } = options;
  resolveHost(hostname, 'connect', rest).then(
    (found) => {
      const bad = isPublicStandIn(hostname) ? undefined : found.find((a) => isPrivateAddress(a.address));
      if (bad) return callback(refusal(hostname, bad.address) as NodeJS.ErrnoException, '', 0);
      if (all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, found);
      const first = found[0];
      if (!first) return callback(new Error(`${hostname} has no address`) as NodeJS.ErrnoException, '', 0);
      return callback(null, first.address, first.family);
    },
    (err: NodeJS.ErrnoException) => callback(err, '', 0),
  );
};

let guardedAgent: Agent | undefined;
let openAgent: Agent | undefined;

/**
 * The undici dispatcher for outbound connections under the policy. With private addresses
 * refused, every connection (redirects included) resolves its host through the guard; IP
 * literals skip DNS, so the pre-request check of `assertOutboundUrl` covers them.
 */
export async function outboundDispatcher(policy: OutboundPolicy): Promise<Agent> {
  // undici is loaded by the first outbound request (a delivery, a source's tool call): a
  // process that makes none, or has not yet, does not hold it.
  const { Agent } = await import('undici');
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
    const { fetch: undiciFetch } = await import('undici');
    const dispatcher = await outboundDispatcher(policy);
    let request = init;
    for (let hop = 0; ; hop++) {
      const response = (await undiciFetch(url, {
        ...(request as Parameters<typeof undiciFetch>[1]),
        redirect: 'manual',
        dispatcher,
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
  const { WebSocket: UndiciWebSocket } = await import('undici');
  return new UndiciWebSocket(checked, {
    protocols: options.protocols ?? [],
    headers: options.headers ?? {},
    dispatcher: await outboundDispatcher(policy),
  }) as unknown as WebSocket;
}
