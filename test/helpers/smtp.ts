// A real SMTP server on 127.0.0.1 (smtp-server) that keeps what it receives, with a small MIME
// reader so tests can assert on the subject and the text and HTML bodies as a person would see
// them. mailparser is not installed, so the reader decodes what nodemailer writes: folded
// headers, RFC 2047 encoded words, multipart bodies, quoted-printable and base64, all UTF-8.
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  /** The envelope sender and recipients (MAIL FROM, RCPT TO). */
  from: string;
  to: string[];
  raw: string;
  /** Top-level headers, lower-cased names, unfolded, encoded words decoded. */
  headers: Record<string, string>;
  subject: string | undefined;
  text: string | undefined;
  html: string | undefined;
}

export interface SmtpServerOptions {
  /** Recipients for which RCPT TO is answered `rejectCode` (default 550). */
  rejectRecipient?: (address: string) => boolean;
  rejectCode?: number;
  /** Require these credentials (AUTH PLAIN/LOGIN over the plain connection); wrong ones get 535. */
  auth?: { user: string; pass: string };
}

export interface TestSmtpServer {
  url: string;
  mails: ReceivedMail[];
  close(): Promise<void>;
}

/** Splits an entity into unfolded headers and body. */
function splitEntity(entity: string): { headers: Record<string, string>; body: string } {
  const match = /\r?\n\r?\n/.exec(entity);
  const head = match ? entity.slice(0, match.index) : entity;
  const body = match ? entity.slice(match.index + match[0].length) : '';
  const headers: Record<string, string> = {};
  for (const line of head.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { headers, body };
}

/** Quoted-printable to bytes: soft line breaks removed, =XX turned into the byte. */
function decodeQuotedPrintable(text: string): Buffer {
  const joined = text.replace(/=\r?\n/g, '');
  const bytes: number[] = [];
  for (let i = 0; i < joined.length; i++) {
    const hex = joined.slice(i + 1, i + 3);
    if (joined[i] === '=' && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(Number.parseInt(hex, 16));
      i += 2;
    } else bytes.push(...Buffer.from(joined[i] ?? '', 'utf8'));
  }
  return Buffer.from(bytes);
}

/** A part's body as text, with the wire's CRLF line ends turned into LF for simpler asserts. */
function decodeBody(body: string, encoding: string | undefined): string {
  let text: string;
  switch (encoding?.toLowerCase()) {
    case 'quoted-printable':
      text = decodeQuotedPrintable(body).toString('utf8');
      break;
    case 'base64':
      text = Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
      break;
    default:
      text = body;
  }
  return text.replace(/\r\n/g, '\n');
}

/** RFC 2047 encoded words (=?UTF-8?Q?…?= / =?UTF-8?B?…?=); blanks between two of them vanish. */
function decodeWords(value: string): string {
  return value
    .replace(/(\?=)\s+(=\?)/g, '$1$2')
    .replace(/=\?([^?]+)\?([bBqQ])\?([^?]*)\?=/g, (_, _charset: string, kind: string, data: string) =>
      kind.toLowerCase() === 'b'
        ? Buffer.from(data, 'base64').toString('utf8')
        : decodeQuotedPrintable(data.replace(/_/g, ' ')).toString('utf8'),
    );
}

/** A header parameter such as `boundary="…"`. */
function param(header: string | undefined, name: string): string | undefined {
  const match = new RegExp(`;\\s*${name}="?([^";]+)"?`, 'i').exec(header ?? '');
  return match?.[1];
}

/** The first text/plain and text/html bodies of an entity, walking multiparts. */
function bodiesOf(entity: string): { text?: string; html?: string } {
  const { headers, body } = splitEntity(entity);
  const type = (headers['content-type'] ?? 'text/plain').split(';')[0]?.trim().toLowerCase();
  if (type?.startsWith('multipart/')) {
    const boundary = param(headers['content-type'], 'boundary');
    if (!boundary) return {};
    const found: { text?: string; html?: string } = {};
    const parts = body.split(`--${boundary}`).slice(1);
    for (const part of parts) {
      if (part.startsWith('--')) break;
      const inner = bodiesOf(part.replace(/^\r?\n/, ''));
      found.text ??= inner.text;
      found.html ??= inner.html;
    }
    return found;
  }
  const decoded = decodeBody(body, headers['content-transfer-encoding']);
  if (type === 'text/html') return { html: decoded };
  if (type === 'text/plain') return { text: decoded };
  return {};
}

export function parseMail(raw: string, from: string, to: string[]): ReceivedMail {
  const { headers } = splitEntity(raw);
  for (const name of Object.keys(headers)) headers[name] = decodeWords(headers[name] ?? '');
  const { text, html } = bodiesOf(raw);
  return { from, to, raw, headers, subject: headers.subject, text, html };
}

export async function startSmtpServer(options: SmtpServerOptions = {}): Promise<TestSmtpServer> {
  const mails: ReceivedMail[] = [];
  const server = new SMTPServer({
    secure: false,
    // No TLS: nodemailer would otherwise upgrade with STARTTLS against a self-signed certificate.
    disabledCommands: options.auth ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
    authOptional: !options.auth,
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === options.auth?.user && auth.password === options.auth?.pass) {
        callback(null, { user: auth.username });
      } else {
        const err = Object.assign(new Error('Authentication failed'), { responseCode: 535 });
        callback(err);
      }
    },
    onRcptTo(address, _session, callback) {
      if (options.rejectRecipient?.(address.address)) {
        const code = options.rejectCode ?? 550;
        const text = code >= 500 ? 'No such user here' : 'Try again later';
        callback(Object.assign(new Error(text), { responseCode: code }));
      } else callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        const to = session.envelope.rcptTo.map((r) => r.address);
        mails.push(parseMail(Buffer.concat(chunks).toString('utf8'), from, to));
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    mails,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
