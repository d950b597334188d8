/** Startup failures end the process with one clear line on stderr and exit code 1. */
export function failStartup(err: unknown): never {
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`svc: cannot start: ${message.split('\n')[0]}\n`);
  process.exit(1);
}
