// The bounds on what a source's tool list may hold. Every tool is sent to the model with each
// step of a run and stored with the source after a connection test, so a server answering
// with thousands of tools or megabytes of schema would make every model request, and the
// sources table, that large. A source past a bound fails to connect, naming the bound: a
// silently shortened list would leave the model without tools the prompt relies on.
import { formatBytes } from '../capped-response.ts';
import type { ToolDefinition } from './types.ts';

/** Tools of one source. */
export const MAX_TOOLS_PER_SOURCE = 256;
/** One tool's definition (name, description and inputSchema) as JSON. */
export const MAX_TOOL_DEFINITION_BYTES = 64 * 1024;
/** All tools of one source, as JSON. */
export const MAX_SOURCE_TOOLS_BYTES = 1024 * 1024;
/** One message from an MCP server (the stdio line and WebSocket message limits are the same). */
export const MAX_MCP_MESSAGE_BYTES = 4 * 1024 * 1024;

/** Why the tools break a bound, or undefined when they are within all of them. */
export function toolBoundsProblem(tools: readonly ToolDefinition[]): string | undefined {
  if (tools.length > MAX_TOOLS_PER_SOURCE) {
    return `it offers more than ${MAX_TOOLS_PER_SOURCE} tools, the limit of a source`;
  }
  let total = 0;
  for (const tool of tools) {
    const size = Buffer.byteLength(JSON.stringify(tool));
    if (size > MAX_TOOL_DEFINITION_BYTES) {
      // The name is the server's text: cut, so a huge name cannot make a huge message.
      return `its tool "${tool.name.slice(0, 100)}" has a definition (name, description and inputSchema) of ${size} bytes, more than the ${formatBytes(MAX_TOOL_DEFINITION_BYTES)} a tool may have`;
    }
    total += size;
  }
  if (total > MAX_SOURCE_TOOLS_BYTES) {
    return `its tools' definitions add up to ${total} bytes, more than the ${formatBytes(MAX_SOURCE_TOOLS_BYTES)} a source's tools may have`;
  }
  return undefined;
}
