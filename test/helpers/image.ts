import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

// The container image's recipe read from the Dockerfile and .dockerignore, and its steps done
// on this machine (no container engine needed): the files the Dockerfile copies, the production
// dependencies, and the command and health check it runs. test/deploy.test.ts uses it.

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface Instruction {
  stage: number;
  keyword: string;
  args: string;
}

/** The Dockerfile's instructions, continuation lines joined, comments dropped, by stage. */
export function dockerfileInstructions(text: string): Instruction[] {
  const logical: string[] = [];
  let current = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line)) continue;
    const continued = line.endsWith('\\');
    current += `${continued ? line.slice(0, -1) : line} `;
    if (!continued) {
      if (current.trim() !== '') logical.push(current.trim().replaceAll(/\s+/g, ' '));
      current = '';
    }
  }
  let stage = -1;
  return logical.map((line) => {
    const [keyword = '', ...rest] = line.split(' ');
    if (keyword.toUpperCase() === 'FROM') stage += 1;
    return { stage, keyword: keyword.toUpperCase(), args: rest.join(' ') };
  });
}

/** `KEY=value KEY2=value2` of an ENV instruction (values without spaces or quotes). */
export function envPairs(args: string): Record<string, string> {
  return Object.fromEntries(args.split(' ').map((pair) => pair.split('=', 2) as [string, string]));
}

/** The exec form (JSON array) of a CMD, or of the CMD of a HEALTHCHECK, as argv. */
export function execForm(args: string): string[] {
  const json = args.slice(args.indexOf('['));
  const argv = JSON.parse(json) as unknown;
  if (!Array.isArray(argv) || !argv.every((a) => typeof a === 'string'))
    throw new Error(`not an exec form: ${args}`);
  return argv;
}

/**
 * Whether .dockerignore leaves `path` (relative to the context) in the build context: the last
 * pattern that matches the path or one of its parent directories decides, `!` keeps.
 */
export function keptByDockerignore(patterns: string[], path: string): boolean {
  const parts = path.split('/');
  const candidates = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
  let kept = true;
  for (const raw of patterns) {
    const negated = raw.startsWith('!');
    const pattern = (negated ? raw.slice(1) : raw).replace(/^\/+/, '').replace(/\/+$/, '');
    const regex = new RegExp(
      `^${pattern
        .replaceAll(/[.+^${}()|[\]\\]/g, '\\$&')
        .replaceAll('**', '\0')
        .replaceAll('*', '[^/]*')
        .replaceAll('?', '[^/]')
        .replaceAll('\0', '.*')}$`,
    );
    if (candidates.some((c) => regex.test(c))) kept = negated;
  }
  return kept;
}

export function dockerignorePatterns(): string[] {
  return readFileSync(join(ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** Every file below `dir` (relative to the repository), or `dir` itself when it is a file. */
function filesOf(path: string): string[] {
  if (!statSync(join(ROOT, path)).isDirectory()) return [path];
  return readdirSync(join(ROOT, path), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));
}

/** The `COPY <source>... <destination>` of the last stage that copy from the build context. */
export function contextCopies(instructions: Instruction[]): { sources: string[]; destination: string }[] {
  const last = Math.max(...instructions.map((i) => i.stage));
  return instructions
    .filter((i) => i.stage === last && i.keyword === 'COPY' && !i.args.startsWith('--'))
    .map((i) => {
      const words = i.args.split(' ');
      return { sources: words.slice(0, -1), destination: words.at(-1) as string };
    });
}

/**
 * Lays the image's /app out in `app` (WORKDIR must be /app): each file the last stage copies
 * from the build context that .dockerignore keeps, at its destination. Returns the files.
 */
export function copyContext(instructions: Instruction[], app: string): string[] {
  const patterns = dockerignorePatterns();
  const copied: string[] = [];
  for (const { sources, destination } of contextCopies(instructions)) {
    const dest = destination.replace(/^\.\/?/, '').replace(/^\/app\/?/, '');
    for (const source of sources) {
      const from = source.replace(/^\.\//, '').replace(/\/$/, '');
      const isDirectory = statSync(join(ROOT, from)).isDirectory();
      for (const file of filesOf(from)) {
        if (!keptByDockerignore(patterns, file)) continue;
        // A directory's contents go into the destination; a file goes into a destination ending
        // in `/` (or one of several sources), else it becomes the destination.
        const target = isDirectory
          ? join(app, dest, relative(from, file))
          : destination.endsWith('/') || sources.length > 1
            ? join(app, dest, file.split('/').pop() as string)
            : join(app, dest);
        mkdirSync(dirname(target), { recursive: true });
        cpSync(join(ROOT, file), target);
        copied.push(file);
      }
    }
  }
  return copied;
}

interface LockEntry {
  version?: string;
  dev?: boolean;
  optional?: boolean;
  optionalDependencies?: Record<string, string>;
}

export function lockPackages(): Record<string, LockEntry> {
  return (
    JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, LockEntry>;
    }
  ).packages;
}

/**
 * The production dependencies as `npm ci --omit=dev` installs them, taken from this checkout's
 * node_modules instead of the registry: every top-level package the lock file does not mark
 * `dev` (with what is nested below it), hard-linked where the file system allows (fast), else
 * copied. Optional packages of other platforms, absent here, are skipped as npm skips them.
 */
export function pruneProductionDependencies(app: string): string[] {
  const installed: string[] = [];
  for (const [key, entry] of Object.entries(lockPackages())) {
    if (key === '' || entry.dev || key.split('node_modules/').length !== 2) continue;
    const source = join(ROOT, key);
    if (!existsSync(source)) {
      if (entry.optional) continue;
      throw new Error(`${key} is a production dependency missing from node_modules`);
    }
    mkdirSync(dirname(join(app, key)), { recursive: true });
    const linked = spawnSync('cp', ['-al', source, join(app, key)]);
    if (linked.status !== 0) cpSync(source, join(app, key), { recursive: true });
    installed.push(key.slice('node_modules/'.length));
  }
  return installed;
}

/** The `node` binaries on this machine older than `major` (for the version check's test). */
export function olderNodes(major: number): string[] {
  const which = spawnSync('sh', ['-c', 'which -a node; ls /usr/bin/node /usr/local/bin/node 2>/dev/null'], {
    encoding: 'utf8',
  });
  const found = new Set(which.stdout.split('\n').filter(Boolean));
  return [...found].filter((bin) => {
    const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim();
    return Number(/^v(\d+)\./.exec(version)?.[1] ?? major) < major;
  });
}
