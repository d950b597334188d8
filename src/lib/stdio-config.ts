// The parts of SVC_STDIO_COMMANDS and SVC_STDIO_USER that need more than a one-line parse.
// config.ts calls these once at boot and turns a problem into its ConfigError.
import { isLoaderVariable } from './loader-variables.ts';

export interface StdioCommands {
  /** The commands stdio sources may run, compared exactly. */
  commands: string[];
  /**
   * Per command, the config.env names a source may give its server. A deny-list of dangerous
   * names always misses one (git alone reads GIT_CONFIG_*, GIT_ASKPASS, GIT_SSH_COMMAND…), so
   * the operator, who knows the program, names what it may be given; nothing else is.
   */
  env: ReadonlyMap<string, ReadonlySet<string>>;
}

const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * `cmd,cmd2[NAME,NAME2]`: commands separated by commas; each may be followed by the variable
 * names its servers may be given, in square brackets. Returns a problem text when malformed.
 */
export function parseStdioCommands(raw: string): StdioCommands | string {
  const commands: string[] = [];
  const env = new Map<string, ReadonlySet<string>>();
  let rest = raw.trim();
  while (rest !== '') {
    const m = /^([^,[\]]*?)\s*(?:\[([^\]]*)\])?\s*(?:,|$)/.exec(rest);
    if (!m || m[0] === '')
      return `cannot be read near "${rest.slice(0, 40)}": write cmd or cmd[NAME,NAME], comma separated`;
    rest = rest.slice(m[0].length).trim();
    const command = (m[1] ?? '').trim();
    if (command === '') {
      if (m[2] !== undefined) return 'has a variable list [..] without a command before it';
      continue;
    }
    if (env.has(command)) return `lists "${command}" twice`;
    const names = new Set<string>();
    for (const name of (m[2] ?? '').split(',').map((n) => n.trim())) {
      if (name === '') continue;
      if (!VARIABLE_NAME.test(name)) return `has "${name}" for ${command}, which is not a variable name`;
      if (isLoaderVariable(name)) {
        return `allows ${name} for ${command}, a variable that makes programs load other code; it cannot be allowed`;
      }
      names.add(name);
    }
    commands.push(command);
    env.set(command, names);
  }
  return { commands, env };
}

/** One user for every server, or a range of uids from which each running server gets its own. */
export type StdioUser = { uid: number; gid: number } | { uidRange: { first: number; last: number } };

/** Looks a user name up in a passwd(5) text. */
function lookupUser(passwd: string, name: string): { uid: number; gid: number } | undefined {
  for (const line of passwd.split('\n')) {
    const [user, , uid, gid] = line.split(':');
    if (user === name && uid !== undefined && gid !== undefined && /^\d+$/.test(uid) && /^\d+$/.test(gid)) {
      return { uid: Number(uid), gid: Number(gid) };
    }
  }
  return undefined;
}

/**
 * The user stdio servers run as. Only root can start a process as another user, and only a
 * service running as root needs it: a server running as root could read the service's
 * environment (/proc/<pid>/environ) and data directory. Root defaults to `nobody`.
 */
export function resolveStdioUser(
  raw: string | undefined,
  processUid: number | undefined,
  passwd: () => string,
  stdioEnabled: boolean,
): StdioUser | undefined | string {
  if (processUid !== 0) {
    return raw === undefined
      ? undefined
      : 'can only be set when the service runs as root (it starts stdio servers as that user)';
  }
  if (!stdioEnabled && raw === undefined) return undefined;
  const wanted = raw ?? 'nobody';
  const range = /^(\d+)-(\d+)$/.exec(wanted);
  if (range) {
    const first = Number(range[1]);
    const last = Number(range[2]);
    if (first < 1 || last < first || last > 4_294_967_294) {
      return 'must be a uid range FIRST-LAST with 0 < FIRST <= LAST < 4294967295';
    }
    return { uidRange: { first, last } };
  }
  let user: { uid: number; gid: number } | undefined;
  const ids = /^(\d+):(\d+)$/.exec(wanted);
  if (ids) user = { uid: Number(ids[1]), gid: Number(ids[2]) };
  else {
    let text = '';
    try {
      text = passwd();
    } catch {
      // No passwd file: only the uid:gid form can be used.
    }
    user = lookupUser(text, wanted);
  }
  if (!user) {
    return raw === undefined
      ? 'is needed: the service runs as root and has no user "nobody" to start stdio servers as; name an unprivileged user or uid:gid'
      : `names no user of this system ("${wanted}"); give a user name, uid:gid or a uid range FIRST-LAST`;
  }
  if (user.uid === 0 || user.gid === 0) return 'must be an unprivileged user, not root (uid or gid 0)';
  return user;
}
