// Builds one model answer from the chunks of a streamed Chat Completion, holding no more than
// the limit of an answer. An accumulator that kept whatever arrives (as the provider SDKs' do)
// would let a provider that ignores max_tokens (or a hostile endpoint) stream until memory runs
// out, so the stream is stopped as soon as the answer passes the limit.
import type {
  ChatCompletionChunk,
  ChatCompletionMessage,
  ChatCompletionMessageFunctionToolCall,
} from 'openai/resources/chat/completions';

/** Tool calls of one answer; a model asking for more at once is stopped (it could not mean it). */
export const MAX_TOOL_CALLS_PER_ANSWER = 128;

export interface WireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  cost?: number;
}

/**
 * Why an answer is incomplete: stopped past the limit of characters or tool calls, or past the
 * byte bound of one streamed event; or ended by the provider at max_tokens.
 */
export type AnswerLimit = 'chars' | 'tool_calls' | 'bytes' | 'max_tokens';

interface PartialCall {
  id: string;
  name: string;
  arguments: string;
}

export class AnswerBuilder {
  readonly #maxChars: number;
  #content = '';
  #calls = new Map<number, PartialCall>();
  #chars = 0;
  #received = 0;
  #finishReason: string | null = null;
  #usage: WireUsage | undefined;
  #stopped: AnswerLimit | undefined;
  #id: string | null = null;

  constructor(maxChars: number) {
    this.#maxChars = maxChars;
  }

  /** Characters of text and tool calls received, those past the limit included (for estimates). */
  get receivedChars(): number {
    return this.#received;
  }
  get usage(): WireUsage | undefined {
    return this.#usage;
  }
  get stopped(): AnswerLimit | undefined {
    return this.#stopped;
  }
  /** The provider's id of the answer (every chunk carries it), if it gave one. */
  get id(): string | null {
    return this.#id;
  }

  /** Adds a chunk; false once the answer is past a limit (the caller stops reading). */
  add(chunk: ChatCompletionChunk): boolean {
    if (this.#stopped) return false;
    if (this.#id === null && typeof chunk.id === 'string' && chunk.id !== '')
      this.#id = chunk.id.slice(0, 200);
    if (chunk.usage) this.#usage = chunk.usage as WireUsage;
    // Only the first choice is used (n is never set); the others are not kept.
    const choice = chunk.choices?.find((c) => c.index === 0);
    if (!choice) return true;
    if (choice.finish_reason) this.#finishReason = choice.finish_reason;
    const delta = choice.delta;
    if (typeof delta?.content === 'string' && !this.#take(delta.content, (t) => (this.#content += t)))
      return false;
    for (const part of delta?.tool_calls ?? []) {
      let call = this.#calls.get(part.index);
      if (!call) {
        if (this.#calls.size >= MAX_TOOL_CALLS_PER_ANSWER) {
          this.#stopped = 'tool_calls';
          return false;
        }
        call = { id: '', name: '', arguments: '' };
        this.#calls.set(part.index, call);
      }
      const target = call;
      if (part.id && !target.id && !this.#take(part.id, (t) => (target.id = t))) return false;
      // As the provider SDKs read them: a name replaces the one before, arguments arrive in pieces.
      const name = part.function?.name;
      if (name && !this.#take(name, (t) => (target.name = t))) return false;
      const args = part.function?.arguments;
      if (args && !this.#take(args, (t) => (target.arguments += t))) return false;
    }
    return true;
  }

  /** Counts `text` against the limit and keeps what fits; false when it did not all fit. */
  #take(text: string, keep: (text: string) => void): boolean {
    this.#received += text.length;
    const room = this.#maxChars - this.#chars;
    if (text.length <= room) {
      this.#chars += text.length;
      keep(text);
      return true;
    }
    // A cut between the halves of a surrogate pair would leave half a character.
    let end = room;
    const last = text.charCodeAt(end - 1);
    if (end > 0 && last >= 0xd800 && last <= 0xdbff) end--;
    keep(text.slice(0, end));
    this.#chars += end;
    this.#stopped = 'chars';
    return false;
  }

  /** The answer as the provider SDKs' accumulators would give it, and why it is incomplete, if it is. */
  result(): { message: ChatCompletionMessage; limit: AnswerLimit | undefined } {
    const toolCalls = [...this.#calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(
        ([index, c]): ChatCompletionMessageFunctionToolCall => ({
          id: c.id || `call_${index}`,
          type: 'function',
          function: { name: c.name, arguments: c.arguments },
        }),
      );
    return {
      message: {
        role: 'assistant',
        content: this.#content === '' && toolCalls.length > 0 ? null : this.#content,
        refusal: null,
        ...(toolCalls.length > 0 && { tool_calls: toolCalls }),
      },
      limit: this.#stopped ?? (this.#finishReason === 'length' ? 'max_tokens' : undefined),
    };
  }
}

export interface AnswerLimits {
  maxOutputChars: number;
  maxOutputTokens: number;
  /** Bytes of one streamed event of an answer (modelEventBytes of maxOutputChars). */
  maxEventBytes: number;
}

/** Bytes of one streamed event: a JSON escape takes at most 6 bytes a character, so a whole answer in one event fits. */
export const modelEventBytes = (maxOutputChars: number): number => 6 * maxOutputChars + 1024 * 1024;

/**
 * The run's output from a final answer (no tool calls). An incomplete one is kept, marked, so
 * the reader knows it stops short: the tokens were paid for, and running again would cost the
 * same and end the same way.
 */
export function markedOutput(content: string, limit: AnswerLimit | undefined, limits: AnswerLimits): string {
  if (limit === 'chars') {
    return `${content}\n\n[output cut at ${limits.maxOutputChars.toLocaleString('en-US')} characters, the limit of a model answer]`;
  }
  if (limit === 'max_tokens') {
    const at =
      limits.maxOutputTokens > 0 ? ` at ${limits.maxOutputTokens.toLocaleString('en-US')} tokens` : '';
    return `${content}\n\n[output cut${at}, the limit of a model answer]`;
  }
  return content;
}

/**
 * Why an incomplete answer fails the run, or undefined when it does not: an answer stopped while
 * calling tools (the last call's arguments are cut, and executing part of what the model asked
 * would be a guess), and one whose stream broke the byte bound (no answer of the model's).
 */
export function stoppedMessage(
  limit: AnswerLimit | undefined,
  callingTools: boolean,
  limits: AnswerLimits,
): string | undefined {
  switch (limit) {
    case 'tool_calls':
      return `The model asked for more than ${MAX_TOOL_CALLS_PER_ANSWER} tool calls in one answer; its answer was stopped there`;
    case 'bytes':
      return `The model provider sent one streamed event larger than ${limits.maxEventBytes} bytes; its answer was stopped there`;
    case 'chars':
      return callingTools
        ? `The model's answer passed ${limits.maxOutputChars.toLocaleString('en-US')} characters, the limit of one answer (SVC_MAX_OUTPUT_CHARS), while it was calling tools; its answer was stopped there`
        : undefined;
    default:
      return undefined;
  }
}
