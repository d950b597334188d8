/**
 * Polls `fn` until it returns a value other than undefined. For outcomes that other processes
 * or loops produce in their own time; the timeout only turns a hang into a clear failure.
 */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  { timeoutMs = 15_000, everyMs = 25 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
