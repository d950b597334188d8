// The words of a delivery, shared by the channels: a subject, a plain-text body, an HTML body
// (the Markdown output rendered) and a short SMS text. Everything here is pure, so the
// channels only decide how to send, never what to say.
import { markdownToHtml } from '../lib/markdown.ts';
import type { DeliveryMessage } from './channel.ts';

/** Long task names are cut in a subject so that mail clients still show the status. */
const MAX_NAME_CHARS = 150;

// The output is rendered by lib/markdown.ts, as on the dashboard: raw HTML escaped, script
// links refused, and images shown as links, so that opening the e-mail loads nothing.

const failed = (message: DeliveryMessage) => message.run.status === 'failed';

/** Cuts `text` to at most `max` UTF-16 units, ending with `…` when cut, never halving a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 0) return '';
  let end = max - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}

/** The task name on one line (a name is the user's text: no newline may reach a header). */
function oneLineName(message: DeliveryMessage): string {
  const name = message.task.name.replace(/\s+/g, ' ').trim() || 'Task';
  return cut(name, MAX_NAME_CHARS);
}

/** `"<task name>: completed"` or `"<task name>: failed"`. */
export function subjectOf(message: DeliveryMessage): string {
  return `${oneLineName(message)}: ${failed(message) ? 'failed' : 'completed'}`;
}

/** The run's result for people: the output, or the failure. */
function resultText(message: DeliveryMessage): string {
  if (failed(message)) return `The run failed: ${message.run.error?.trim() || 'no reason was given'}`;
  const output = message.run.output?.trim();
  return output || '(The run completed without output.)';
}

/** Run id, cost, tokens and duration, whichever the run has. */
function footerParts(message: DeliveryMessage): string[] {
  const { run } = message;
  const parts: string[] = [];
  if (run.id) parts.push(`Run ${run.id}`);
  // Costs are in cents and often fractions of one: shown in dollars with four decimals.
  if (run.costCents !== undefined) parts.push(`cost $${(run.costCents / 100).toFixed(4)}`);
  if (run.tokensUsed !== undefined) parts.push(`${run.tokensUsed} tokens`);
  if (run.durationMs !== undefined) parts.push(`${(run.durationMs / 1000).toFixed(1)} s`);
  return parts;
}

/** The plain-text body: the result, the run link when there is one, and a footer. */
export function plainTextOf(message: DeliveryMessage): string {
  const lines = [resultText(message), ''];
  if (message.runUrl) lines.push(`View the run: ${message.runUrl}`, '');
  const footer = footerParts(message);
  if (footer.length > 0) lines.push('-- ', footer.join(' · '));
  return `${lines.join('\n').trimEnd()}\n`;
}

const escapeHtml = (text: string) =>
  text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');

/**
 * The HTML body: the output rendered from Markdown (or the failure as escaped text) in a
 * minimal document. Styles are inline because many mail clients drop <style> blocks.
 */
export function htmlOf(message: DeliveryMessage): string {
  const subject = escapeHtml(subjectOf(message));
  const body =
    failed(message) || !message.run.output?.trim()
      ? `<p style="margin:0 0 16px;white-space:pre-wrap">${escapeHtml(resultText(message))}</p>`
      : markdownToHtml(message.run.output);
  const link = message.runUrl
    ? `<p style="margin:24px 0 0"><a href="${escapeHtml(message.runUrl)}" style="color:#2563eb">View the run</a></p>`
    : '';
  const footer = footerParts(message);
  const footerHtml =
    footer.length > 0
      ? `<p style="margin:24px 0 0;color:#6b7280;font-size:12px">${escapeHtml(footer.join(' · '))}</p>`
      : '';
  return [
    '<!doctype html>',
    '<html><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${subject}</title></head>`,
    '<body style="margin:0;padding:24px;background:#f3f4f6;color:#111827;font-family:-apple-system,BlinkMacSystemFont,\'Segoe UI\',Helvetica,Arial,sans-serif;font-size:15px;line-height:1.5">',
    '<div style="max-width:640px;margin:0 auto;padding:24px;background:#ffffff;border-radius:8px">',
    `<h1 style="margin:0 0 16px;font-size:18px">${subject}</h1>`,
    `<div>${body}</div>`,
    link,
    footerHtml,
    '</div></body></html>',
    '',
  ].join('\n');
}

/**
 * The SMS text: `"<task name>: <output or failure>"` on one line, cut with `…` so that, with
 * ` <runUrl>` appended when set, the whole is at most `maxChars` long. A link too long to fit
 * at all is left out rather than cut (a cut link is worse than none).
 */
export function smsTextOf(message: DeliveryMessage, maxChars = 320): string {
  const text = `${oneLineName(message)}: ${resultText(message)}`.replace(/\s+/g, ' ').trim();
  const suffix = message.runUrl ? ` ${message.runUrl}` : '';
  if (suffix.length >= maxChars) return cut(text, maxChars);
  return `${cut(text, maxChars - suffix.length)}${suffix}`;
}
