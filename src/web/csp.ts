// The dashboard's Content-Security-Policy. Pages load nothing from elsewhere: no remote images
// (Markdown from a model or a skill cannot make the browser fetch a tracking pixel), and the only
// script and style a page may run are the inline ones the code itself declares through
// `inlineScript` and `inlineStyle`, allowed by their SHA-256 hash. Markup that somehow slipped
// past escaping could not run script, load anything or frame the page.
import { createHash } from 'node:crypto';
import { type Html, raw } from './html.ts';

const scriptHashes = new Set<string>();
const styleHashes = new Set<string>();
let cached: string | undefined;

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * A `<script>` whose exact text is allowed by the policy. Only for constant code, declared at
 * module load (each distinct text adds a hash to every page's header).
 */
export function inlineScript(code: string): Html {
  if (code.includes('</')) throw new Error('inline script must not contain "</"');
  scriptHashes.add(sha256(code));
  cached = undefined;
  return raw(`<script>${code}</script>`);
}

/** A `<style>` whose exact text is allowed by the policy; constant CSS only, like `inlineScript`. */
export function inlineStyle(css: string): Html {
  if (css.includes('</')) throw new Error('inline style must not contain "</"');
  styleHashes.add(sha256(css));
  cached = undefined;
  return raw(`<style>${css}</style>`);
}

/**
 * The header's value. `connect-src 'self'` lets the schedule preview fetch its fragment;
 * `img-src 'self'` allows images of this site only (the pages have none today), never another
 * host's.
 * `form-action` is left open on purpose: the billing forms are answered with a redirect to
 * Stripe, which a browser checks against `form-action` too.
 */
export function dashboardCsp(): string {
  cached ??= [
    "default-src 'none'",
    `script-src ${[...scriptHashes].join(' ') || "'none'"}`,
    `style-src ${[...styleHashes].join(' ') || "'none'"}`,
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return cached;
}
