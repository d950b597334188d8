// The words of a delivery, shared by the channels: a subject, a plain-text body, an HTML body
// (the Markdown output rendered) and a short SMS text. Everything here is pure, so the
// channels only decide how to send, never what to say.
import { markdownToHtml } from '../lib/markdown.ts';
import { type ChannelMessage, type DeliveryMessage, isNotice, type NoticeMessage } from './channel.ts';

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
function oneLineName(message: ChannelMessage): string {
  const name = message.task.name.replace(/\s+/g, ' ').trim() || 'Task';
  return cut(name, MAX_NAME_CHARS);
}

const dollars = (cents: number) => `$${(cents / 100).toFixed(2)}`;

/** What a notice says in a few words (a subject, the start of an SMS). */
function noticeHeadline(message: NoticeMessage): string {
  const { notice } = message;
  switch (notice.kind) {
    case 'task.paused':
      return `paused after ${notice.payload.consecutiveFailures} consecutive failed runs`;
    case 'task.cost_limit_reached':
      return 'monthly cost limit reached';
    case 'source.disconnected':
      return `source "${notice.payload.sourceName}" needs reconnecting`;
  }
}

/** What a notice says in full, for people, and what they can do about it. */
function noticeText(message: NoticeMessage): string {
  const { notice } = message;
  switch (notice.kind) {
    case 'task.paused':
      return `${notice.payload.reason}\n\nThe task gets no runs until it is resumed (status active), which also resets its count of failed runs.`;
    case 'task.cost_limit_reached':
      return `The task's runs cost ${dollars(notice.payload.costCents)} this month, reaching its monthly cost limit of ${dollars(notice.payload.limitCents)}. It gets no runs until ${notice.payload.periodEnd} or until the limit is raised.`;
    case 'source.disconnected':
      return `${notice.payload.reason}\n\nRuns that use the source fail until it is reconnected: open the source in the dashboard and choose Reconnect (or POST /api/svc/sources/${notice.payload.sourceId}/connect).`;
  }
}

/** `"<task name>: completed"`, `"<task name>: failed"`, or the notice's headline. */
export function subjectOf(message: ChannelMessage): string {
  if (isNotice(message)) return `${oneLineName(message)}: ${noticeHeadline(message)}`;
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
export function plainTextOf(message: ChannelMessage): string {
  if (isNotice(message)) return `${noticeText(message)}\n\n-- \nTask ${message.task.id}\n`;
  const lines = [resultText(message), ''];
  if (message.change) {
    lines.push(`Changes since the previous delivered run (${message.change.previousRunId}):`, '');
    lines.push(message.change.diff.trimEnd());
    if (message.change.diffTruncated) lines.push('(The diff was cut here.)');
    lines.push('');
  }
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
export function htmlOf(message: ChannelMessage): string {
  const subject = escapeHtml(subjectOf(message));
  const text = (t: string) => `<p style="margin:0 0 16px;white-space:pre-wrap">${escapeHtml(t)}</p>`;
  if (isNotice(message)) return htmlDocument(subject, text(noticeText(message)), '', []);
  const body =
    failed(message) || !message.run.output?.trim()
      ? text(resultText(message))
      : markdownToHtml(message.run.output);
  const change = message.change
    ? `<h2 style="margin:24px 0 8px;font-size:15px">Changes since the previous delivered run</h2>
<pre style="margin:0;padding:12px;background:#f9fafb;border-radius:6px;font-size:12px;overflow-x:auto;white-space:pre-wrap">${escapeHtml(message.change.diff)}${message.change.diffTruncated ? '\n(The diff was cut here.)' : ''}</pre>`
    : '';
  const link = message.runUrl
    ? `<p style="margin:24px 0 0"><a href="${escapeHtml(message.runUrl)}" style="color:#2563eb">View the run</a></p>`
    : '';
  return htmlDocument(subject, `${body}${change}`, link, footerParts(message));
}

/** The minimal HTML document of an e-mail: a heading, the body, a link and a footer. */
function htmlDocument(subject: string, body: string, link: string, footer: string[]): string {
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
export function smsTextOf(message: ChannelMessage, maxChars = 320): string {
  if (isNotice(message)) {
    const headline = `${oneLineName(message)}: ${noticeHeadline(message)}.`;
    const what = message.notice.kind === 'task.paused' ? ' Resume it to run it again.' : '';
    return cut(`${headline}${what}`, maxChars);
  }
  const text = `${oneLineName(message)}: ${resultText(message)}`.replace(/\s+/g, ' ').trim();
  const suffix = message.runUrl ? ` ${message.runUrl}` : '';
  if (suffix.length >= maxChars) return cut(text, maxChars);
  return `${cut(text, maxChars - suffix.length)}${suffix}`;
}
