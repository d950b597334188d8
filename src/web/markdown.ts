// Markdown (model output, skill content) rendered for the dashboard. Configured like the e-mail
// renderer in delivery/content.ts: `html: false` escapes raw HTML, so `<script>` or
// `<img onerror>` in a model's answer arrive as text, and markdown-it's default validateLink
// (kept on purpose) refuses javascript:, vbscript:, file: and most data: links, which then stay
// literal text. That is what makes the result safe to mark as raw. Images are shown as links,
// never loaded: a remote image in a model's answer or a skill would tell its owner who read the
// page and when (the Content-Security-Policy refuses them too, see csp.ts).
import MarkdownIt from 'markdown-it';
import { type Html, raw } from './html.ts';

const markdown = new MarkdownIt({ html: false, linkify: true });

// Links in model output lead off the dashboard: no referrer, no window.opener.
const defaultLinkOpen =
  markdown.renderer.rules.link_open ??
  ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
markdown.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx]?.attrSet('rel', 'noopener noreferrer nofollow');
  return defaultLinkOpen(tokens, idx, options, env, self);
};

markdown.renderer.rules.image = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  const src = String(token?.attrGet('src') ?? '');
  const alt = self.renderInlineAsText(token?.children ?? [], options, env);
  const text = markdown.utils.escapeHtml(alt ? `Image: ${alt}` : 'Image');
  // An image inside a link becomes that link's text (a link cannot hold another).
  let depth = 0;
  for (const t of tokens.slice(0, idx))
    depth += t.type === 'link_open' ? 1 : t.type === 'link_close' ? -1 : 0;
  if (depth > 0) return text;
  return `<a href="${markdown.utils.escapeHtml(src)}" rel="noopener noreferrer nofollow">${text}</a>`;
};

export function renderMarkdown(text: string): Html {
  return raw(markdown.render(text));
}
