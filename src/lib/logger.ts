import { hostname } from 'node:os';
import pino from 'pino';

export type Logger = pino.Logger;

/**
 * Structured JSON logs. Credentials are redacted by path wherever they might be logged; the
 * request serializer logs no headers at all.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'apiKey',
  'webhookSecret',
  'token',
  'password',
  '*.apiKey',
  '*.password',
  '*.token',
];

/** Lines kept before a turn of the event loop ends are written at once past this many characters. */
const COALESCE_MAX_CHARS = 64 * 1024;

/**
 * Standard output for the logs, written once per turn of the event loop: the lines of every
 * request answered in one turn (under load, several) go out in one write instead of one each,
 * which cost a read a system call per request. A line waits at most until the turn ends (or
 * until 64 KiB are waiting); the writes themselves are pino's synchronous destination's, so
 * they keep their order and a full pipe is waited for, never dropped. Lines still waiting when
 * the process exits (a clean stop, process.exit, an uncaught exception) are written by the exit
 * handler; only a kill -9 or a crash of the runtime itself loses them, at most one turn's.
 */
class CoalescedStdout {
  readonly #out = pino.destination({ fd: 1, sync: true });
  #pending = '';
  readonly #flush = () => this.flushSync();

  constructor() {
    process.on('exit', this.#flush);
  }

  write(line: string): boolean {
    if (this.#pending === '') setImmediate(this.#flush);
    this.#pending += line;
    if (this.#pending.length >= COALESCE_MAX_CHARS) this.flushSync();
    return true;
  }

  flushSync(): void {
    if (this.#pending === '') return;
    const text = this.#pending;
    this.#pending = '';
    this.#out.write(text);
  }
}

/** One per process: every logger writing to standard output shares it, so lines keep their order. */
let stdout: CoalescedStdout | undefined;

function sharedStdout(): CoalescedStdout {
  stdout ??= new CoalescedStdout();
  return stdout;
}

interface LineSink {
  destination: pino.DestinationStream;
  /** The logger's own members as pino writes them after `time` (pid and hostname, its base). */
  base: string;
}

const sinks = new WeakMap<Logger, LineSink>();

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  const out = destination ?? sharedStdout();
  const logger = pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, out);
  sinks.set(logger, {
    destination: out,
    base: `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())}`,
  });
  return logger;
}

/**
 * Writes info lines of one fixed shape for `logger`, as pino would write them (level, time,
 * pid, hostname, the members, msg), without pino's generic formatting: for a line written per
 * request, whose members the caller writes as JSON text itself (see the access line,
 * http/plugins/observability.ts). No redaction is applied: a caller must never pass a
 * credential. A logger createLogger did not make (a child, say) gets the members parsed and
 * written through its info(), likewise without redaction.
 */
export function infoLineWriter(logger: Logger): (members: string, msg: string) => void {
  const sink = sinks.get(logger);
  if (!sink) {
    const plain = logger.child({}, { redact: { paths: [] } });
    return (members, msg) => plain.info(JSON.parse(`{${members}}`) as object, msg);
  }
  const { destination, base } = sink;
  const msgOf = new Map<string, string>();
  return (members, msg) => {
    if (!logger.isLevelEnabled('info')) return;
    let quoted = msgOf.get(msg);
    if (quoted === undefined) {
      quoted = JSON.stringify(msg);
      if (msgOf.size < 16) msgOf.set(msg, quoted);
    }
    destination.write(`{"level":30,"time":${Date.now()}${base},${members},"msg":${quoted}}\n`);
  };
}
