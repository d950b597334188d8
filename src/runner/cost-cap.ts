// A task's cost cap per run (`maxCostCentsPerRun`): each model call's max_tokens is bounded by
// what is left at the catalog's prices, after the input the call will certainly be charged for.
//
// The input of the next call is not known in tokens until the provider has read it, so it is
// estimated from above: one token per byte of the request's messages and tools as JSON (a
// tokenizer's token covers at least one byte of text, and the JSON's quotes, keys and escapes
// more than pay for the few tokens a provider adds around each message). After the first call,
// the provider's own count of the last call's prompt, plus its answer and the bytes of the
// messages added since, is a second bound from above; the smaller of the two is used.
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { CatalogModel } from '../domain/models.ts';
import type { StepUsage } from './model-client.ts';

/** Cents to 6 significant digits, for messages: 0.0031, 5, 2.34375. */
export const centsText = (cents: number) => `${Number(cents.toPrecision(6))}`;

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

export type NextCall =
  | { ok: true; maxTokens: number | undefined; capBinds: boolean }
  | { ok: false; message: string };

export class RunBudget {
  readonly #cap: number | null;
  readonly #model: CatalogModel;
  readonly #configMaxTokens: number | undefined;
  /** The last call's prompt and answer in tokens as the provider counted them, and the messages it was sent. */
  #last: { tokens: number; messages: number } | undefined;

  constructor(cap: number | null, model: CatalogModel, configMaxTokens: number) {
    this.#cap = cap;
    this.#model = model;
    this.#configMaxTokens = configMaxTokens > 0 ? configMaxTokens : undefined;
  }

  /** An upper bound on the prompt tokens of a request with these messages and tools. */
  inputTokensBound(
    messages: readonly ChatCompletionMessageParam[],
    tools: readonly ChatCompletionTool[],
  ): number {
    const all = bytesOf(messages) + (tools.length > 0 ? bytesOf(tools) : 0);
    if (!this.#last) return all;
    const added = bytesOf(messages.slice(this.#last.messages));
    return Math.min(all, this.#last.tokens + added);
  }

  /**
   * The max_tokens of the next call, given what the run has cost so far (`spent`), or why no
   * call can be paid for. Without a cap: SVC_MAX_OUTPUT_TOKENS (undefined when unbounded).
   */
  nextCall(
    spent: number,
    messages: readonly ChatCompletionMessageParam[],
    tools: readonly ChatCompletionTool[],
  ): NextCall {
    const cap = this.#cap;
    if (cap === null) return { ok: true, maxTokens: this.#configMaxTokens, capBinds: false };
    const input = this.inputTokensBound(messages, tools);
    const outputCents = cap - spent - (input * this.#model.inputCentsPerMillionTokens) / 1e6;
    const price = this.#model.outputCentsPerMillionTokens;
    const affordable = price > 0 ? Math.floor((outputCents * 1e6) / price) : Number.POSITIVE_INFINITY;
    if (outputCents <= 0 || affordable < 1) return { ok: false, message: this.unaffordable(spent, input) };
    const config = this.#configMaxTokens ?? Number.POSITIVE_INFINITY;
    if (config <= affordable) return { ok: true, maxTokens: this.#configMaxTokens, capBinds: false };
    return { ok: true, maxTokens: affordable, capBinds: true };
  }

  /** Notes a call's usage: the next call's input bound starts from it. */
  answered(usage: StepUsage, messagesSent: number): void {
    // A provider that reports no prompt tokens gives no bound to start from.
    this.#last =
      usage.promptTokens > 0
        ? { tokens: usage.promptTokens + usage.completionTokens, messages: messagesSent }
        : undefined;
  }

  /** Whether the run's cost has reached the cap. */
  reached(spent: number): boolean {
    return this.#cap !== null && spent >= this.#cap;
  }

  reachedMessage(spent: number): string {
    return `Cost limit reached: this run cost ${centsText(spent)} cents, and the task's maxCostCentsPerRun is ${centsText(this.#cap ?? 0)} cents; the run was stopped there`;
  }

  cutMessage(spent: number, maxTokens: number | undefined): string {
    return `Cost limit reached: the final answer was cut at ${(maxTokens ?? 0).toLocaleString('en-US')} tokens, all that the task's maxCostCentsPerRun of ${centsText(this.#cap ?? 0)} cents left room for; this run cost ${centsText(spent)} cents`;
  }

  unaffordable(spent: number, inputTokens: number): string {
    if (this.#cap === 0)
      return "Cost limit reached: the task's maxCostCentsPerRun is 0 cents, so no model call is made; raise it or remove it";
    return `Cost limit reached: this run cost ${centsText(spent)} cents, and the task's maxCostCentsPerRun is ${centsText(this.#cap ?? 0)} cents; what is left does not pay for the next model call (up to ${inputTokens.toLocaleString('en-US')} input tokens at the catalog's prices), so it was not made`;
  }
}
