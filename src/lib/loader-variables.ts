/**
 * Environment variables that make a program load or run code other than its own: the dynamic
 * linker's, and the language runtimes' "also load this" switches. A stdio source may set its
 * server's environment freely except for these, so that allowing one specific command does not
 * become allowing any code (`NODE_OPTIONS=--import=data:…` needs no file at all). Compared in
 * upper case.
 */
const LOADER_PREFIXES = ['LD_', 'DYLD_'];
const LOADER_NAMES = new Set([
  'NODE_OPTIONS',
  'NODE_PATH',
  'NODE_REPL_EXTERNAL_MODULE',
  'PYTHONPATH',
  'PYTHONHOME',
  'PYTHONSTARTUP',
  'PYTHONINSPECT',
  'PYTHONWARNINGS',
  'PERL5OPT',
  'PERL5LIB',
  'PERLLIB',
  'RUBYOPT',
  'RUBYLIB',
  'BASH_ENV',
  'ENV',
  'SHELLOPTS',
  'BASHOPTS',
  'PS4',
  'PROMPT_COMMAND',
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
  'JDK_JAVA_OPTIONS',
  'GCONV_PATH',
  'GIT_EXEC_PATH',
  'GIT_SSH_COMMAND',
]);

export function isLoaderVariable(name: string): boolean {
  const upper = name.toUpperCase();
  return (
    LOADER_NAMES.has(upper) ||
    LOADER_PREFIXES.some((p) => upper.startsWith(p)) ||
    upper.startsWith('BASH_FUNC_')
  );
}

export const LOADER_VARIABLE_MESSAGE =
  'cannot be set for a stdio server: it makes programs load other code (dynamic linker or runtime preload)';

/** Why a config.env name is refused for a command: the operator did not allow it (SVC_STDIO_COMMANDS). */
export function notAllowedMessage(command: string, allowed: ReadonlySet<string> | undefined): string {
  const list = [...(allowed ?? [])];
  return `is not a variable this service lets "${command}" servers have (SVC_STDIO_COMMANDS ${
    list.length ? `allows ${list.join(', ')}` : 'allows none for it'
  })`;
}
