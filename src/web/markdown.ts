// Markdown (model output, skill content) rendered for the dashboard. Configured like the e-mail
// renderer in delivery/content.ts: `html: false` escapes raw HTML, so `<script>` or
// `<img onerror>` in a model's answer arrive as text, and markdown-it's default validateLink
// (kept on purpose) refuses javascript:, vbscript:, file: and most data: links, which then stay
// literal text. That is what makes the result safe to mark as raw.
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

export function renderMarkdown(text: string): Html {
  return raw(markdown.render(text));
}
