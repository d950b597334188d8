import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

// Reading the project's own Markdown docs, for the tests that keep them equal to the code.

/** The text of `docs/<name>` (or of `README.md` when `name` is `../README.md`). */
export function readDoc(name: string): string {
  return readFileSync(new URL(`../../docs/${name}`, import.meta.url), 'utf8');
}

/** The rows of the first Markdown table after the line `heading`, as trimmed cells (padding and
 * the separator row dropped; the header row kept). */
export function tableAfter(markdown: string, heading: string): string[][] {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `no heading "${heading}"`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    const text = line.trim();
    if (text.startsWith('|')) {
      rows.push(
        text
          .slice(1, -1)
          .split('|')
          .map((cell) => cell.trim()),
      );
    } else if (rows.length > 0) break;
  }
  assert.ok(rows.length > 2, `no table after "${heading}"`);
  return rows.filter((row) => !row.every((cell) => /^-+$/.test(cell)));
}

/** The section that starts at the line `heading` and ends before the next heading of its level
 * or a higher one. */
export function sectionOf(markdown: string, heading: string): string {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `no heading "${heading}"`);
  const level = heading.indexOf(' ');
  const end = lines.findIndex((line, i) => i > start && /^#+ /.test(line) && line.indexOf(' ') <= level);
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

/** The names in backticks in `text`: `a`, `b/c.ts`. */
export function codeSpans(text: string): string[] {
  return [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] as string);
}
