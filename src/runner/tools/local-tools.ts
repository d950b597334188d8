// The service's built-in tools (a source of type `local`): the current time in a time zone,
// and fetching a web page as text. fetch_url goes through the guarded fetch of the
// connection, so the SSRF policy applies to the model's URLs like to any other.
import { describeFetchError, describeUrl, isTextual, readBodyText } from './http-request.ts';
import type {
  ConnectOptions,
  ConnectResult,
  SourceToConnect,
  ToolCallOutcome,
  ToolConnection,
  ToolDefinition,
} from './types.ts';

const FETCH_MAX_BYTES = 1024 * 1024;
const DEFAULT_MAX_CHARS = 20_000;
const MAX_CHARS = 100_000;

const TOOLS: readonly ToolDefinition[] = [
  {
    name: 'current_time',
    description: 'The current date and time in a time zone, with the weekday and the UTC offset.',
    inputSchema: {
      type: 'object',
      properties: {
        timezone: { type: 'string', description: 'IANA time zone, e.g. "Europe/Paris"; default UTC' },
      },
    },
  },
  {
    name: 'fetch_url',
    description: 'Fetches a web page or document by HTTP GET and returns its text (HTML is reduced to text).',
    inputSchema: {
      type: 'object',
      properties: {
        url: { type: 'string', description: 'An http or https URL' },
        maxChars: {
          type: 'integer',
          minimum: 1,
          maximum: MAX_CHARS,
          default: DEFAULT_MAX_CHARS,
          description: 'Characters of text to return at most',
        },
      },
      required: ['url'],
    },
  },
];

/** The parts of an instant in a zone, by name (weekday, year, month, …, timeZoneName). */
function zoneParts(now: Date, timeZone: string): Record<string, string> {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    weekday: 'long',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    timeZoneName: 'longOffset',
  });
  return Object.fromEntries(format.formatToParts(now).map((part) => [part.type, part.value]));
}

export function currentTime(args: Record<string, unknown>, now = new Date()): ToolCallOutcome {
  const zone = args.timezone === undefined || args.timezone === '' ? 'UTC' : args.timezone;
  if (typeof zone !== 'string')
    return { ok: false, message: 'timezone must be a string such as "Asia/Tokyo"' };
  let parts: Record<string, string>;
  try {
    parts = zoneParts(now, zone);
  } catch {
    return {
      ok: false,
      message: `unknown time zone "${zone.slice(0, 100)}": use an IANA name such as "Europe/Paris"`,
    };
  }
  // longOffset gives "GMT+09:00", or plain "GMT" for a zero offset.
  const offset = (parts.timeZoneName ?? 'GMT').replace(/^GMT/, '') || '+00:00';
  const local = `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second}`;
  return {
    ok: true,
    text: [
      `Instant (UTC): ${now.toISOString()}`,
      `Time zone: ${zone} (UTC${offset})`,
      `Local: ${parts.weekday}, ${local}`,
    ].join('\n'),
  };
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/** Decodes the common named entities and numeric ones in one pass (so `&amp;lt;` stays `&lt;`). */
function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,6});/gi, (whole, name: string) => {
    if (name.startsWith('#')) {
      const code =
        name[1] === 'x' || name[1] === 'X' ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1));
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[name.toLowerCase()] ?? whole;
  });
}

/** Elements whose content is not text for a reader. */
const SKIPPED = new Set(['script', 'style', 'noscript', 'template', 'svg', 'iframe']);
/** Elements that start a new line in the text. */
const BLOCKS = new Set([
  ...['p', 'div', 'br', 'li', 'ul', 'ol', 'tr', 'table', 'section', 'article', 'header', 'footer', 'nav'],
  ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'title', 'blockquote', 'pre', 'hr', 'main', 'aside', 'form'],
]);

/**
 * HTML to readable text: scripts, styles and comments dropped, tags removed (block elements
 * become line breaks), entities decoded, whitespace collapsed. A scan with indexOf rather
 * than regular expressions over the whole page, so an unclosed tag or comment cannot make it
 * quadratic.
 */
export function htmlToText(html: string): string {
  // ASCII-only lowering keeps the indexes of `lower` those of `html` (toLowerCase can change
  // the length of some non-ASCII text).
  const lower = html.replace(/[A-Z]+/g, (s) => s.toLowerCase());
  const tagName = /<(\/?)([a-z][a-z0-9-]*)/y;
  let out = '';
  let i = 0;
  while (i < html.length) {
    const lt = html.indexOf('<', i);
    if (lt === -1) {
      out += html.slice(i);
      break;
    }
    out += html.slice(i, lt);
    if (lower.startsWith('<!--', lt)) {
      const end = html.indexOf('-->', lt + 4);
      i = end === -1 ? html.length : end + 3;
      continue;
    }
    tagName.lastIndex = lt;
    const match = tagName.exec(lower);
    if (!match && html[lt + 1] !== '!' && html[lt + 1] !== '?') {
      out += '<'; // a "<" that starts no tag, as in "a < b"
      i = lt + 1;
      continue;
    }
    const gt = html.indexOf('>', lt + 1);
    if (gt === -1) break;
    i = gt + 1;
    const name = match?.[2] ?? '';
    if (match && match[1] === '' && SKIPPED.has(name)) {
      const close = lower.indexOf(`</${name}`, i);
      const closeEnd = close === -1 ? -1 : html.indexOf('>', close);
      i = closeEnd === -1 ? html.length : closeEnd + 1;
    } else if (BLOCKS.has(name)) {
      out += '\n';
    } else if (match) {
      out += ' '; // inline elements still separate words ("<td>a</td><td>b</td>")
    }
  }
  return decodeEntities(out)
    .split('\n')
    .map((line) => line.replace(/\s+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

async function fetchUrl(
  args: Record<string, unknown>,
  options: ConnectOptions,
  signal: AbortSignal,
): Promise<ToolCallOutcome> {
  if (typeof args.url !== 'string') return { ok: false, message: 'url must be a string' };
  let url: URL;
  try {
    url = new URL(args.url);
  } catch {
    return { ok: false, message: `${args.url.slice(0, 200)} is not a valid URL` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { ok: false, message: 'only http and https URLs can be fetched' };
  }
  const requested = args.maxChars ?? DEFAULT_MAX_CHARS;
  if (typeof requested !== 'number' || !Number.isFinite(requested) || requested < 1) {
    return { ok: false, message: `maxChars must be a number from 1 to ${MAX_CHARS}` };
  }
  const maxChars = Math.min(Math.floor(requested), MAX_CHARS);
  try {
    const response = await options.fetch(url, {
      headers: { accept: 'text/html, text/plain, application/json, */*;q=0.5' },
      signal,
    });
    const type = response.headers.get('content-type');
    let text: string;
    if (isTextual(type)) {
      const body = await readBodyText(response, FETCH_MAX_BYTES);
      text = /html/i.test(type ?? '') ? htmlToText(body.text) : body.text;
    } else {
      await response.body?.cancel();
      text = `[${type} content not shown]`;
    }
    const cut = text.length > maxChars ? `${text.slice(0, maxChars)}\n[cut at ${maxChars} characters]` : text;
    return { ok: true, text: `HTTP ${response.status} ${type ?? '(no content type)'}\n${cut}` };
  } catch (err) {
    return { ok: false, message: describeFetchError(err, describeUrl(url)).message };
  }
}

export async function connectLocalSource(
  _source: SourceToConnect,
  options: ConnectOptions,
): Promise<ConnectResult> {
  const connection: ToolConnection = {
    tools: TOOLS,
    async call(name, args, signal) {
      if (name === 'current_time') return currentTime(args);
      if (name === 'fetch_url') return fetchUrl(args, options, signal);
      return { ok: false, message: `the local source has no tool named ${name}` };
    },
    async close() {},
  };
  return { ok: true, connection };
}
