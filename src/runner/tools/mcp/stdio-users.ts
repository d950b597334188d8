// Which user a stdio server runs as. A single SVC_STDIO_USER keeps servers away from the
// service, but servers running at once as the same user can read each other's environment
// (/proc/<pid>/environ: another organization's tokens) and files. A uid range gives each
// running server a uid of its own, free in this process and owning no process on the host.
import { readdirSync, statSync } from 'node:fs';
import type { StdioUser } from '../../../lib/stdio-config.ts';

export interface ClaimedUser {
  uid: number;
  gid: number;
  release(): void;
}

const claimed = new Set<number>();
const ATTEMPTS = 64;

/** The uids that own a process on this host now (Linux /proc; empty elsewhere). */
function uidsInUse(): Set<number> {
  const owners = new Set<number>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return owners;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      owners.add(statSync(`/proc/${entry}`).uid);
    } catch {
      // The process ended meanwhile.
    }
  }
  return owners;
}

/** A user for one server, or undefined when every uid of the range tried is taken. */
export function claimStdioUser(user: StdioUser): ClaimedUser | undefined {
  if (!('uidRange' in user)) return { uid: user.uid, gid: user.gid, release() {} };
  const { first, last } = user.uidRange;
  const busy = uidsInUse();
  const size = last - first + 1;
  for (let i = 0; i < Math.min(ATTEMPTS, size * 2); i++) {
    // Random, so that processes of the service sharing a host rarely reach for the same one.
    const uid = first + Math.floor(Math.random() * size);
    if (claimed.has(uid) || busy.has(uid)) continue;
    claimed.add(uid);
    return { uid, gid: uid, release: () => claimed.delete(uid) };
  }
  return undefined;
}
