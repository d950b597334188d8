// request.log made only when a request logs something. Fastify gives every request a child of
// the service's logger bound to its request id; pino builds a child by writing its bindings as
// JSON through the redaction pass, about 1 KB of garbage and a few µs per request, while most
// requests never log anything but their access line (which is written apart, see
// plugins/observability.ts). The child here is built on the first call and then used as is.
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, LogFn } from 'pino';

class LazyRequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  readonly #options: ChildLoggerOptions;
  #child: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  get #real(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options);
    return this.#child;
  }

  get level(): string {
    return this.#real.level;
  }
  set level(level: string) {
    this.#real.level = level;
  }

  fatal(...args: Parameters<LogFn>): void {
    this.#real.fatal(...args);
  }
  error(...args: Parameters<LogFn>): void {
    this.#real.error(...args);
  }
  warn(...args: Parameters<LogFn>): void {
    this.#real.warn(...args);
  }
  info(...args: Parameters<LogFn>): void {
    this.#real.info(...args);
  }
  debug(...args: Parameters<LogFn>): void {
    this.#real.debug(...args);
  }
  trace(...args: Parameters<LogFn>): void {
    this.#real.trace(...args);
  }
  silent(...args: Parameters<LogFn>): void {
    this.#real.silent(...args);
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real.child(bindings, options);
  }
}

/** Fastify's childLoggerFactory: a request's logger, made when first used. */
export function lazyRequestLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new LazyRequestLogger(logger, bindings, options);
}
