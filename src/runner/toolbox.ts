// The tools of a run's sources as the model sees them. Tool names must be unique across the
// run and match the function-name rule of the Chat Completions API (^[a-zA-Z0-9_-]{1,64}$),
// so each tool is offered as `<source slug>__<tool name>`, cleaned and cut to 64 characters,
// with a numbered suffix in the rare case two still clash.
import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { capText, type ToolConnection, type ToolDefinition } from './tools/types.ts';

const MAX_NAME = 64;
/**
 * Characters of all the tool results of one answer together. Each result is cut at
 * MAX_TOOL_OUTPUT_CHARS, but an answer may hold up to 128 calls, and every result is sent again
 * with each later step: past this budget the longest results are cut to an equal share.
 */
export const MAX_TOOL_RESULTS_CHARS_PER_ANSWER = 400_000;
/**
 * Tools offered in one run, and their definitions together as JSON: every one is sent with each
 * model request. A source alone may have 256 tools and 1 MiB; a task may have 50 sources.
 */
export const MAX_TOOLS_PER_RUN = 512;
export const MAX_RUN_TOOLS_BYTES = 4 * 1024 * 1024;
/** Tool calls of one answer running at once: each may hold an answer of up to 4 MiB meanwhile. */
export const TOOL_CALLS_AT_ONCE = 8;

/** The name a tool is offered under, before clash handling. */
export function exposedToolName(sourceSlug: string, toolName: string): string {
  const clean = (s: string) => s.replace(/[^a-zA-Z0-9_-]+/g, '_');
  return `${clean(sourceSlug)}__${clean(toolName)}`.slice(0, MAX_NAME);
}

interface Entry {
  sourceName: string;
  connection: ToolConnection;
  tool: ToolDefinition;
}

export class Toolbox {
  readonly #entries = new Map<string, Entry>();
  /** The offered names of the tools the model has called (a task's requiredTools are checked on them). */
  readonly #called = new Set<string>();

  add(source: { slug: string; name: string }, connection: ToolConnection): void {
    for (const tool of connection.tools) {
      const base = exposedToolName(source.slug, tool.name);
      let name = base;
      for (let n = 2; this.#entries.has(name); n++) name = `${base.slice(0, MAX_NAME - `_${n}`.length)}_${n}`;
      this.#entries.set(name, { sourceName: source.name, connection, tool });
    }
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * The tools called so far, each under its offered name and its own: a call counts once the
   * tool is invoked (its own error included), not a call of an unknown name or with arguments
   * that are not a JSON object.
   */
  calledTools(): Set<string> {
    const names = new Set<string>();
    for (const name of this.#called) {
      names.add(name);
      const own = this.#entries.get(name)?.tool.name;
      if (own) names.add(own);
    }
    return names;
  }

  /** Why these tools are too many or too large to offer in one run, or undefined. */
  boundsProblem(): string | undefined {
    if (this.#entries.size > MAX_TOOLS_PER_RUN) {
      return `The task's sources offer ${this.#entries.size} tools, more than the ${MAX_TOOLS_PER_RUN} a run can offer the model; detach some sources`;
    }
    const bytes = Buffer.byteLength(JSON.stringify(this.definitions()));
    if (bytes > MAX_RUN_TOOLS_BYTES) {
      return `The task's sources' tools take ${bytes} bytes, more than the ${MAX_RUN_TOOLS_BYTES / 1024 / 1024} MiB a run can send the model with each request; detach some sources`;
    }
    return undefined;
  }

  /** The `tools` of a Chat Completions request. */
  definitions(): ChatCompletionTool[] {
    return [...this.#entries].map(([name, { tool, sourceName }]) => ({
      type: 'function',
      function: {
        name,
        description: `${tool.description ?? tool.name} (tool "${tool.name}" of source "${sourceName}")`,
        parameters: tool.inputSchema,
      },
    }));
  }

  /**
   * Runs the tool calls of one answer, TOOL_CALLS_AT_ONCE at a time, and gives their texts in
   * order, within MAX_TOOL_RESULTS_CHARS_PER_ANSWER together.
   */
  async callAll(
    calls: readonly { name: string; arguments: string }[],
    signal: AbortSignal,
  ): Promise<string[]> {
    const texts: string[] = new Array(calls.length).fill('');
    let next = 0;
    const lane = async () => {
      for (let i = next++; i < calls.length; i = next++) {
        const call = calls[i] as { name: string; arguments: string };
        texts[i] = (await this.call(call.name, call.arguments, signal)).text;
      }
    };
    await Promise.all(Array.from({ length: Math.min(TOOL_CALLS_AT_ONCE, calls.length) }, lane));
    return withinBudget(texts, MAX_TOOL_RESULTS_CHARS_PER_ANSWER);
  }

  /**
   * Runs one tool call of the model and gives the text to send back. Nothing here fails the
   * run: an unknown tool, arguments that are not a JSON object or a tool's own error are told
   * to the model, which can correct itself.
   */
  async call(
    name: string,
    rawArguments: string,
    signal: AbortSignal,
  ): Promise<{ ok: boolean; text: string }> {
    const entry = this.#entries.get(name);
    if (!entry) return { ok: false, text: `Error: there is no tool named "${name}"` };
    let args: unknown;
    try {
      args = rawArguments.trim() === '' ? {} : JSON.parse(rawArguments);
    } catch {
      return { ok: false, text: 'Error: the arguments were not valid JSON; send a JSON object' };
    }
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      return { ok: false, text: 'Error: the arguments must be a JSON object' };
    }
    this.#called.add(name);
    try {
      const outcome = await entry.connection.call(entry.tool.name, args as Record<string, unknown>, signal);
      return outcome.ok
        ? { ok: true, text: capText(outcome.text) }
        : { ok: false, text: capText(`Error: ${outcome.message}`) };
    } catch (err) {
      if (signal.aborted) throw err;
      return {
        ok: false,
        text: `Error: the tool failed: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
  }
}

/**
 * The texts cut so that together they hold at most `budget` characters: the shorter ones are
 * kept whole, and the rest share what is left equally (each cut is marked).
 */
export function withinBudget(texts: readonly string[], budget: number): string[] {
  const total = texts.reduce((sum, t) => sum + t.length, 0);
  if (total <= budget) return [...texts];
  const out = [...texts];
  let left = budget;
  let remaining = texts.length;
  const byLength = texts.map((_, i) => i).sort((a, b) => (texts[a]?.length ?? 0) - (texts[b]?.length ?? 0));
  for (const i of byLength) {
    const text = texts[i] ?? '';
    const share = Math.floor(left / remaining--);
    out[i] = text.length <= share ? text : capText(text, share);
    left -= Math.min(text.length, share);
  }
  return out;
}
