// The unified diff a deliverOn `change` task's delivery carries: the previous delivered output
// against this one, line by line, with three lines of context, as `diff -u` writes it. Pure.

/** The diff is cut to this many characters (with `diffTruncated`); an e-mail or webhook stays small. */
export const MAX_DIFF_CHARS = 16_000;
/**
 * The line matching compares (lines apart after the common start and end) x (lines of the
 * other): past this the changed middle is shown as removed and added whole, so the work and
 * memory stay bounded (4 MB) whatever the outputs.
 */
const MAX_MATCH_CELLS = 1_000_000;
const CONTEXT = 3;

type Op = { t: ' ' | '-' | '+'; line: string };

const linesOf = (text: string) => {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
};

/** The edit script of the middles (a, b) by longest common subsequence, or whole when too large. */
function middleOps(a: string[], b: string[]): Op[] {
  const n = a.length;
  const m = b.length;
  if ((n + 1) * (m + 1) > MAX_MATCH_CELLS) {
    return [...a.map((line) => ({ t: '-' as const, line })), ...b.map((line) => ({ t: '+' as const, line }))];
  }
  // lcs[i * (m + 1) + j]: the longest common subsequence of a[i..] and b[j..].
  const w = m + 1;
  const lcs = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * w + j] =
        a[i] === b[j]
          ? (lcs[(i + 1) * w + j + 1] ?? 0) + 1
          : Math.max(lcs[(i + 1) * w + j] ?? 0, lcs[i * w + j + 1] ?? 0);
    }
  }
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      ops.push({ t: ' ', line: a[i] ?? '' });
      i++;
      j++;
    } else if ((lcs[(i + 1) * w + j] ?? 0) >= (lcs[i * w + j + 1] ?? 0))
      ops.push({ t: '-', line: a[i++] ?? '' });
    else ops.push({ t: '+', line: b[j++] ?? '' });
  }
  while (i < n) ops.push({ t: '-', line: a[i++] ?? '' });
  while (j < m) ops.push({ t: '+', line: b[j++] ?? '' });
  return ops;
}

function editScript(a: string[], b: string[]): Op[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end])
    end++;
  const same = (lines: string[]) => lines.map((line) => ({ t: ' ' as const, line }));
  return [
    ...same(a.slice(0, start)),
    ...middleOps(a.slice(start, a.length - end), b.slice(start, b.length - end)),
    ...same(a.slice(a.length - end)),
  ];
}

const range = (start: number, length: number) =>
  length === 1 ? `${start}` : `${length === 0 ? start - 1 : start},${length}`;

/** The hunks of an edit script, each change with up to CONTEXT unchanged lines around it. */
function hunks(ops: Op[]): string[] {
  const changed = ops.flatMap((op, k) => (op.t === ' ' ? [] : [k]));
  const out: string[] = [];
  let g = 0;
  while (g < changed.length) {
    const first = changed[g] ?? 0;
    let last = first;
    while (g + 1 < changed.length && (changed[g + 1] ?? 0) - last <= 2 * CONTEXT) last = changed[++g] ?? last;
    g++;
    const from = Math.max(0, first - CONTEXT);
    const to = Math.min(ops.length, last + CONTEXT + 1);
    // Line numbers where the hunk starts in each text: the lines each side had before it.
    let aLine = 1;
    let bLine = 1;
    for (const op of ops.slice(0, from)) {
      if (op.t !== '+') aLine++;
      if (op.t !== '-') bLine++;
    }
    const body = ops.slice(from, to);
    const aLen = body.filter((op) => op.t !== '+').length;
    const bLen = body.filter((op) => op.t !== '-').length;
    out.push(`@@ -${range(aLine, aLen)} +${range(bLine, bLen)} @@`, ...body.map((op) => `${op.t}${op.line}`));
  }
  return out;
}

/**
 * The unified diff from `previous` to `current`, headed with the two runs, cut to
 * MAX_DIFF_CHARS at a line's end (`truncated` then).
 */
export function unifiedDiff(
  previous: { runId: string; output: string },
  current: { runId: string; output: string },
): { diff: string; truncated: boolean } {
  const lines = [
    `--- run ${previous.runId}`,
    `+++ run ${current.runId}`,
    ...hunks(editScript(linesOf(previous.output), linesOf(current.output))),
  ];
  let diff = '';
  for (const line of lines) {
    if (diff.length + line.length + 1 > MAX_DIFF_CHARS) return { diff, truncated: true };
    diff += `${line}\n`;
  }
  return { diff, truncated: false };
}
