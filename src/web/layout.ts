// The page shell: one stylesheet inline (no extra request, nothing to build; allowed by its hash,
// see csp.ts), a skip link, a navigation that collapses on small screens, and the signed-in
// person's organization. Pages use classes, never `style` attributes, which the policy refuses.
import type { Viewer } from '../domain/users.ts';
import { inlineStyle } from './csp.ts';
import { type Html, html, raw } from './html.ts';

const STYLE = inlineStyle(`
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #5b6570; --bg: #fff; --card: #f6f8fa; --line: #d0d7de;
  --accent: #0b57d0; --ok: #1a7f37; --bad: #c62828; --warn: #9a6700; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9aa6b2; --bg: #0d1117; --card: #161b22; --line: #30363d; --accent: #7aa7ff; } }
* { box-sizing: border-box; } body { margin: 0; color: var(--fg); background: var(--bg); line-height: 1.5; }
a { color: var(--accent); } .skip { position: absolute; left: -9999px; } .skip:focus { left: 1rem; top: 1rem; }
header.top { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; align-items: center; padding: .75rem 1.25rem; border-bottom: 1px solid var(--line); }
header.top nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; list-style: none; margin: 0; padding: 0; }
header.top nav a[aria-current="page"] { font-weight: 700; text-decoration: none; }
.brand { font-weight: 700; text-decoration: none; color: var(--fg); } .who { margin-left: auto; color: var(--muted); font-size: .9rem; }
main { max-width: 72rem; margin: 0 auto; padding: 1.25rem; } h1 { font-size: 1.5rem; margin-top: 0; }
table { width: 100%; border-collapse: collapse; } th, td { text-align: left; padding: .45rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .85rem; color: var(--muted); font-weight: 600; } .table-wrap { overflow-x: auto; }
form.stack { display: grid; gap: .75rem; max-width: 36rem; } label { font-weight: 600; display: block; }
input, select, textarea { font: inherit; padding: .45rem .55rem; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); width: 100%; }
input[type=checkbox], input[type=radio] { width: auto; } textarea { min-height: 8rem; } label.choice { font-weight: 400; }
button, .button { font: inherit; padding: .45rem .9rem; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; text-decoration: none; display: inline-block; }
button.secondary, .button.secondary { background: transparent; color: var(--accent); } button.danger { background: var(--bad); border-color: var(--bad); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.row { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; } .muted { color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(11rem, 1fr)); gap: .75rem; margin-bottom: 1.25rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; } .card .n { font-size: 1.4rem; font-weight: 700; }
.flash { padding: .6rem .9rem; border-radius: 6px; border: 1px solid var(--line); background: var(--card); margin-bottom: 1rem; }
.flash.error { border-color: var(--bad); } .flash.ok { border-color: var(--ok); }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 999px; font-size: .8rem; border: 1px solid var(--line); }
.badge.completed, .badge.delivered, .badge.active { color: var(--ok); border-color: var(--ok); }
.badge.failed { color: var(--bad); border-color: var(--bad); } .badge.pending, .badge.running, .badge.paused { color: var(--warn); border-color: var(--warn); }
.secret { font-family: ui-monospace, monospace; word-break: break-all; background: var(--card); padding: .5rem; border-radius: 6px; border: 1px solid var(--line); }
.output { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; overflow-x: auto; }
fieldset { border: 1px solid var(--line); border-radius: 8px; } legend { font-weight: 600; }
form.inline { display: inline; } .row.spaced { margin-bottom: 1rem; } .row.ends { justify-content: space-between; }
.gap-below { margin-bottom: 1.25rem; } form.gap-below { margin-bottom: 1rem; } .pre-wrap { white-space: pre-wrap; } pre.pre-wrap { margin: 0; }
svg.chart { max-width: 720px; color: var(--accent); }
`);

const NAV = [
  ['/dashboard', 'Overview'],
  ['/dashboard/tasks', 'Tasks'],
  ['/dashboard/runs', 'Runs'],
  ['/dashboard/skills', 'Skills'],
  ['/dashboard/sources', 'Sources'],
  ['/dashboard/keys', 'API keys'],
  ['/dashboard/members', 'Members'],
  ['/dashboard/billing', 'Billing'],
] as const;

export interface PageOptions {
  title: string;
  viewer?: Viewer | undefined;
  /** The path of the current section, for aria-current. */
  section?: string;
  /** A message shown at the top (after a form). */
  flash?: { kind: 'ok' | 'error'; text: string } | undefined;
  /** Reload the page every few seconds (a run still going). */
  refreshSeconds?: number;
}

export function page(o: PageOptions, body: Html): string {
  const nav = o.viewer
    ? html`<nav aria-label="Main"><ul>${NAV.map(
        ([href, label]) =>
          html`<li><a href="${href}" ${o.section === href ? raw('aria-current="page"') : ''}>${label}</a></li>`,
      )}</ul></nav>
      <div class="who">${o.viewer.email} ·
        <form class="inline" method="post" action="/logout">${csrfField(o.viewer.csrfToken)}<button class="secondary" type="submit">Sign out</button></form>
      </div>`
    : '';
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
${o.refreshSeconds ? html`<meta http-equiv="refresh" content="${o.refreshSeconds}">` : ''}
<title>${o.title} · Scheduled AI tasks</title>${STYLE}</head>
<body><a class="skip" href="#main">Skip to content</a>
<header class="top"><a class="brand" href="/dashboard">Scheduled AI tasks</a>${nav}</header>
<main id="main">${o.flash ? html`<div class="flash ${o.flash.kind}" role="${o.flash.kind === 'error' ? 'alert' : 'status'}">${o.flash.text}</div>` : ''}${body}</main>
</body></html>`.value;
}

/** The hidden field every form of a signed-in page carries (see web/auth.ts). */
export const csrfField = (token: string) => html`<input type="hidden" name="_csrf" value="${token}">`;

/** A status word as a badge. */
export const badge = (status: string | undefined) =>
  status ? html`<span class="badge ${status}">${status}</span>` : '';
