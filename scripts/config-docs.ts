/**
 * Writes the configuration reference from the one schema of src/config/schema.ts: the whole of
 * .env.example, and in docs/operations.md each group's table between its markers
 * (`<!-- config:GROUP:start -->` and `<!-- config:GROUP:end -->`), the prose around them left
 * as it is. test/config-docs.test.ts fails when the committed files differ from what this
 * writes.
 *
 *   npm run config-docs
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { TSchema } from 'typebox';
import { CONFIG_GROUPS, type ConfigGroup, EnvSchema } from '../src/config/schema.ts';

interface Variable {
  name: string;
  group: ConfigGroup;
  description: string;
  type?: string;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  enum?: readonly string[];
  protocols?: readonly string[];
  example?: string;
  defaultText?: string;
  valuesText?: string;
}

const variables: Variable[] = Object.entries(EnvSchema.properties as Record<string, TSchema>).map(
  ([name, schema]) => ({ name, ...(schema as Omit<Variable, 'name'>) }),
);

function defaultCell(v: Variable): string {
  if (v.defaultText !== undefined) return v.defaultText;
  if (v.default === undefined) return 'unset';
  return typeof v.default === 'number' ? String(v.default) : `\`${v.default}\``;
}

function valuesCell(v: Variable): string {
  if (v.valuesText !== undefined) return v.valuesText;
  if (v.type === 'integer') return `${v.minimum} to ${v.maximum}`;
  if (v.type === 'boolean') return '`true` or `false` (also `1`/`0`, `yes`/`no`)';
  if (v.enum) return v.enum.map((x) => `\`${x}\``).join(', ');
  if (v.protocols) return `${v.protocols.map((p) => `\`${p.slice(0, -1)}://\``).join(' or ')} URL`;
  if (v.minLength !== undefined) return `text, at least ${v.minLength} characters`;
  return 'text';
}

/** A Markdown table padded the way the rest of docs/ is formatted. */
function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(3, ...rows.map((row) => (row[i] ?? '').length))) ?? [];
  const line = (row: string[]) => `| ${row.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  const [head, ...body] = rows;
  return [line(head ?? []), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...body.map(line)].join(
    '\n',
  );
}

export function groupTable(group: ConfigGroup): string {
  const rows = variables
    .filter((v) => v.group === group)
    .map((v) => [`\`${v.name}\``, defaultCell(v), valuesCell(v), v.description]);
  return table([['variable', 'default', 'values', 'meaning'], ...rows]);
}

/** docs/operations.md with every group's table replaced by the one the schema gives. */
export function renderOperations(markdown: string): string {
  let out = markdown;
  for (const group of Object.keys(CONFIG_GROUPS) as ConfigGroup[]) {
    const start = `<!-- config:${group}:start -->`;
    const end = `<!-- config:${group}:end -->`;
    const from = out.indexOf(start);
    const to = out.indexOf(end);
    if (from < 0 || to < from || out.indexOf(start, from + 1) >= 0) {
      throw new Error(`docs/operations.md needs exactly one ${start} ... ${end} pair`);
    }
    out = `${out.slice(0, from + start.length)}\n\n${groupTable(group)}\n\n${out.slice(to)}`;
  }
  return out;
}

/** Words wrapped into `# ` comment lines of at most 96 characters; backticks dropped. */
function comment(text: string): string[] {
  const lines: string[] = [];
  let line = '#';
  for (const word of text.replaceAll('`', '').split(/\s+/).filter(Boolean)) {
    if (line.length + 1 + word.length > 96 && line !== '#') {
      lines.push(line);
      line = '#';
    }
    line += ` ${word}`;
  }
  lines.push(line);
  return lines;
}

const HEADER = `# Configuration of the scheduled AI task service.
#
# Generated from src/config/schema.ts by \`npm run config-docs\`; edit the schema, not this file.
#
# Every variable the service reads is listed here, commented out, with its default (or, where
# it has none, an example): copying this file as it is changes nothing. The service reads only
# its process environment and does not load a .env file by itself; one way to use one is:
#
#   set -a && . ./.env && set +a && npm start
#
# Values are checked at start (src/config.ts). A bad value stops startup with one line on stderr
# naming the variable, e.g.
#   svc: cannot start: invalid configuration: PORT must be a whole number, got "abc"
# An empty value counts as unset. Booleans accept true/false, 1/0, yes/no.
# The CLI (npm run svc -- ...) reads the same variables and checks them the same way.
`;

const RULE = `# ${'-'.repeat(93)}`;

export function renderEnvExample(): string {
  const parts = [HEADER];
  for (const [group, title] of Object.entries(CONFIG_GROUPS)) {
    parts.push(`${RULE}\n# ${title}\n${RULE}\n`);
    for (const v of variables.filter((x) => x.group === group)) {
      // "text" says nothing a comment needs to repeat; the docs' table keeps it for its column.
      const values = valuesCell(v);
      const facts = values === 'text' ? [] : [`Values: ${values}.`];
      if (v.defaultText !== undefined) facts.push(`Default: ${v.defaultText}.`);
      const shown = v.example ?? (v.default === undefined ? '' : String(v.default));
      parts.push([...comment(`${v.description} ${facts.join(' ')}`), `# ${v.name}=${shown}`, ''].join('\n'));
    }
  }
  return `${parts.join('\n').trimEnd()}\n`;
}

if (import.meta.main) {
  const root = new URL('../', import.meta.url);
  const operations = new URL('docs/operations.md', root);
  writeFileSync(new URL('.env.example', root), renderEnvExample());
  writeFileSync(operations, renderOperations(readFileSync(operations, 'utf8')));
  console.log('wrote .env.example and the configuration tables of docs/operations.md');
}
