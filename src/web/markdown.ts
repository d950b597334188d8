// Markdown (model output, skill content) on the dashboard: the shared renderer of lib/markdown.ts
// (raw HTML escaped, script links refused, images shown as links), whose result is safe to mark
// as raw. The Content-Security-Policy refuses remote images as well (see csp.ts).
import { markdownToHtml } from '../lib/markdown.ts';
import { type Html, raw } from './html.ts';

export function renderMarkdown(text: string): Html {
  return raw(markdownToHtml(text));
}
