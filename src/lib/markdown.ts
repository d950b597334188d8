// Markdown from outside (model output, skill content) rendered to HTML for people: the dashboard
// (web/markdown.ts) and delivered e-mails (delivery/content.ts) use this one renderer.
// - `html: false` escapes raw HTML, so `<script>` or `<img onerror>` in a model's answer arrive
//   as text.
// - markdown-it's default validateLink (kept on purpose) refuses javascript:, vbscript:, file:
//   and most data: links, which then stay literal text.
// - Images are shown as links, never loaded: a remote image in a model's answer (which a
//   prompt-injected source can steer) would tell its owner who read the page or the e-mail, and
//   when, with whatever the image's address carries.
// - Links lead elsewhere: no referrer, no window.opener.
import MarkdownIt from 'markdown-it';

const markdown = new MarkdownIt({ html: false, linkify: true });

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

/** Safe HTML for `text`: no raw HTML, no script links, no image that loads. */
export function markdownToHtml(text: string): string {
  return markdown.render(text);
}
