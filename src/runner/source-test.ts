// POST /sources/{id}/test: connect for real, list the tools, remember what was found.
import { findSource, recordSourceTest } from '../db/sql/sources.ts';
import type { Deps } from '../domain/deps.ts';
import { errors } from '../lib/errors.ts';
import type { SourceTestResult, Tool } from '../schemas/source.ts';
import { connectStoredSource } from './run-sources.ts';

/**
 * Connects to the source and lists its tools. Every way a connection can fail (a command off
 * the allowlist, a refused connection, refused credentials, a time-out) is an answer with
 * `success: false` and a message, not an error status: the request itself was fine.
 * A success stores the tools, marks the source active and sets lastConnectedAt; a failure
 * marks it inactive and keeps the tools last found.
 */
export async function testSource(deps: Deps, organizationId: string, id: string): Promise<SourceTestResult> {
  const row = await findSource(deps.db, organizationId, id);
  if (!row) throw errors.notFound('Source');
  // The slot is held until the server is stopped again, not only while connecting.
  return deps.sourceTests.run(organizationId, async () => {
    const result = await connectStoredSource(deps, row, new AbortController().signal);
    if (!result.ok) {
      await recordSourceTest(deps.db, organizationId, id, { ok: false, at: deps.clock.now() });
      deps.log.info({ sourceId: id, errorType: result.errorType }, 'source test failed');
      return { success: false, message: result.message };
    }
    const tools: Tool[] = result.connection.tools.map((t) => ({
      name: t.name,
      ...(t.description !== undefined && { description: t.description }),
      inputSchema: t.inputSchema,
    }));
    await result.connection.close();
    await recordSourceTest(deps.db, organizationId, id, { ok: true, tools, at: deps.clock.now() });
    return {
      success: true,
      message: `Connected to "${row.name}": ${tools.length} tool${tools.length === 1 ? '' : 's'} available`,
      tools,
    };
  });
}
