// What the model reads of an MCP tool result.
import type { ContentBlock } from '@modelcontextprotocol/sdk/types.js';

/** The model's view of a tool result: text parts, placeholders for binary parts. */
export function resultText(result: {
  content?: unknown;
  structuredContent?: unknown;
  toolResult?: unknown;
}): string {
  const blocks = Array.isArray(result.content) ? (result.content as ContentBlock[]) : [];
  const parts: string[] = [];
  let hasText = false;
  for (const block of blocks) {
    switch (block.type) {
      case 'text':
        hasText = true;
        parts.push(block.text);
        break;
      case 'image':
      case 'audio':
        parts.push(`[${block.type}: ${block.mimeType}, ${Buffer.byteLength(block.data, 'base64')} bytes]`);
        break;
      case 'resource':
        if ('text' in block.resource && typeof block.resource.text === 'string') {
          hasText = true;
          parts.push(block.resource.text);
        } else parts.push(`[resource: ${block.resource.uri}]`);
        break;
      case 'resource_link':
        parts.push(`[link: ${block.uri}]`);
        break;
      default:
        parts.push(`[${String((block as { type?: unknown }).type)} content]`);
    }
  }
  if (!hasText && result.structuredContent !== undefined)
    parts.push(JSON.stringify(result.structuredContent));
  // Servers of the 2024-10-07 protocol answer with `toolResult` instead of `content`.
  if (blocks.length === 0 && result.structuredContent === undefined && result.toolResult !== undefined) {
    parts.push(typeof result.toolResult === 'string' ? result.toolResult : JSON.stringify(result.toolResult));
  }
  return parts.join('\n');
}
