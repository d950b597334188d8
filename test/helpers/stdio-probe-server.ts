// A stdio MCP server (the official SDK) that behaves like a git-based MCP server and reports
// what it can reach. At start it opens a repository with the real `git` (`git init`, then
// `git status`), so git reads every GIT_* variable it was given: GIT_CONFIG_COUNT and
// GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n can set `core.fsmonitor`, a command git runs through
// the shell. Its one tool, `probe`, says who it runs as, what its environment is, and whether
// it can read the environment of the process that started it (/proc/<ppid>/environ) and the
// paths given as its arguments (a service's data directory and files in it).
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

const git = (...args: string[]) => {
  try {
    execFileSync('git', args, { stdio: 'ignore', timeout: 10_000 });
  } catch {
    // What git does with its configuration is the point, not whether it succeeded.
  }
};
git('init', '-q', 'repo');
git('-C', 'repo', 'status');

function attempt(read: () => string | string[]): { ok: true; bytes: number } | { ok: false; code: string } {
  try {
    const value = read();
    return { ok: true, bytes: Array.isArray(value) ? value.length : value.length };
  } catch (err) {
    return { ok: false, code: (err as NodeJS.ErrnoException).code ?? String(err) };
  }
}

const server = new McpServer({ name: 'git-style', version: '1.0.0' });
server.registerTool('probe', { description: 'What this server runs as and can read' }, async () => {
  const reach: Record<string, unknown> = {
    [`/proc/${process.ppid}/environ`]: attempt(() => readFileSync(`/proc/${process.ppid}/environ`, 'latin1')),
  };
  for (const path of process.argv.slice(2)) {
    reach[path] = attempt(() => {
      try {
        return readdirSync(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return readFileSync(path, 'latin1');
        throw err;
      }
    });
  }
  const report = {
    pid: process.pid,
    uid: process.getuid?.(),
    gid: process.getgid?.(),
    cwd: process.cwd(),
    env: process.env,
    reach,
  };
  return { content: [{ type: 'text', text: JSON.stringify(report) }] };
});
await server.connect(new StdioServerTransport());
