// One model call over the OpenAI-compatible Chat Completions API: the request as JSON, the answer
// streamed back as Server-Sent Events (model-events.ts), each event a chunk of the completion
// given to the answer's builder (model-answer.ts), retries as the provider SDKs make them
// (model-request.ts). The `openai` SDK did this until it was measured as a quarter of a worker's
// CPU with the instant model stand-in (CPU profile at concurrency 32: 24.7% of the busy samples
// in its own code, building header lists, parsing events through several layers of iterators,
// formatting a debug line per request whatever the log level); one POST and its events need none
// of that. Its types still describe the messages (a type-only import: no code of it is loaded).
//
// Answers are streamed: the request timeout then bounds the wait for the answer to start, not
// its length, so a long answer is never cut off and retried while a provider that accepts the
// connection but never answers is retried after SVC_MODEL_TIMEOUT_SECONDS. What bounds the
// length is max_tokens (SVC_MAX_OUTPUT_TOKENS), and, for a provider that ignores it, the
// answer's characters (SVC_MAX_OUTPUT_CHARS): past them the stream is stopped, never retried.
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessage,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { ResponseFormatJSONSchema } from 'openai/resources/shared';
import type { Config } from '../config.ts';
import { formatBytes, tooLargeIn } from './capped-response.ts';
import { AnswerBuilder, type AnswerLimit, modelEventBytes, type WireUsage } from './model-answer.ts';
import { serverEvents } from './model-events.ts';
import { MODEL_MAX_RETRIES, postWithRetries, type RequestFailure } from './model-request.ts';
import { answerText, type ModelHttpAnswer, modelTransport } from './model-transport.ts';
import { redact } from './tools/redact.ts';

/** Provider error text kept in a run's `error` (provider messages can be long). */
const MAX_PROVIDER_MESSAGE = 500;
/** Characters per token when a stopped answer's usage must be estimated (no usage chunk came). */
export const ESTIMATED_CHARS_PER_TOKEN = 4;

/** Usage of one step; `cost` is the provider-reported charge in US dollars (OpenRouter and others). */
export interface StepUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  costUsd: number | undefined;
}

export type ModelStep =
  | {
      ok: true;
      message: ChatCompletionMessage;
      usage: StepUsage;
      /** The provider's id of the answer, when it gave one. */
      providerCallId: string | null;
      /** Set when the answer is incomplete: stopped at a limit (usage estimated), or ended by max_tokens. */
      limit?: AnswerLimit;
    }
  | { ok: false; errorType: 'provider_error' | 'timeout'; message: string };

export interface ModelRequest {
  model: string;
  messages: ChatCompletionMessageParam[];
  tools: ChatCompletionTool[];
  /** `max_tokens` of this call (a run's cost cap may lower it); else SVC_MAX_OUTPUT_TOKENS. */
  maxTokens?: number | undefined;
  /** Structured output: the answer as JSON matching a schema (models whose catalog entry says so). */
  responseFormat?: ResponseFormatJSONSchema | undefined;
}

export interface ModelClient {
  step(request: ModelRequest, signal: AbortSignal): Promise<ModelStep>;
}

function usageOf(wire: WireUsage | undefined): StepUsage {
  const promptTokens = wire?.prompt_tokens ?? 0;
  const completionTokens = wire?.completion_tokens ?? 0;
  return {
    promptTokens,
    completionTokens,
    totalTokens: wire?.total_tokens ?? promptTokens + completionTokens,
    costUsd: typeof wire?.cost === 'number' && Number.isFinite(wire.cost) ? wire.cost : undefined,
  };
}

/**
 * The usage of an answer stopped before its usage chunk: the provider charges for what it
 * generated until the connection closed, so the tokens are estimated from the characters sent
 * and received (priced later like any step without a provider cost). A usage chunk that did
 * arrive wins.
 */
function estimatedUsage(
  answer: AnswerBuilder,
  messages: ChatCompletionMessageParam[],
  tools: ChatCompletionTool[],
): StepUsage {
  if (answer.usage) return usageOf(answer.usage);
  const sent = JSON.stringify(messages).length + (tools.length > 0 ? JSON.stringify(tools).length : 0);
  const promptTokens = Math.ceil(sent / ESTIMATED_CHARS_PER_TOKEN);
  const completionTokens = Math.ceil(answer.receivedChars / ESTIMATED_CHARS_PER_TOKEN);
  return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens, costUsd: undefined };
}

/**
 * An answer cut off by the run's stop (cancel, lost lease, time-out, end of a shutdown's grace
 * period) after the provider had started sending it: it has charged for the prompt and for what
 * it generated until the connection closed, at least, so the usage is estimated as for an answer
 * stopped at a limit unless its usage chunk had come. The answer itself is never acted on.
 */
function cutOffStep(
  answer: AnswerBuilder,
  messages: ChatCompletionMessageParam[],
  tools: ChatCompletionTool[],
): ModelStep {
  const { message } = answer.result();
  return { ok: true, message, usage: estimatedUsage(answer, messages, tools), providerCallId: answer.id };
}

/** The provider's own words from an error body: its `error.message`, its `error`, or the text. */
function providerMessage(body: string): string {
  let parsed: { error?: unknown } | undefined;
  try {
    parsed = JSON.parse(body) as { error?: unknown };
  } catch {
    // Not JSON: the text as it came.
  }
  const error = parsed?.error as { message?: unknown } | string | undefined;
  if (typeof error === 'object' && error !== null && error.message !== undefined) {
    return typeof error.message === 'string' ? error.message : JSON.stringify(error.message);
  }
  if (error !== undefined && error !== null) return typeof error === 'string' ? error : JSON.stringify(error);
  return body.trim() || 'no message';
}

/** Thrown while an answer is read: the provider sent an error, or JSON that is not an object. */
class UnreadableAnswer extends Error {}

/** One event's (or a whole answer's) JSON: an object, and not the provider's error. */
function answerObject(text: string, isError: boolean): Record<string, unknown> {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new UnreadableAnswer(`The model provider's answer could not be read: ${(err as Error).message}`);
  }
  if (data === null || typeof data !== 'object') {
    throw new UnreadableAnswer(
      "The model provider's answer could not be read: an event that is not a JSON object",
    );
  }
  if (isError || (data as { error?: unknown }).error) {
    throw new UnreadableAnswer(`The model provider refused the request: ${providerMessage(text)}`);
  }
  const { choices } = data as { choices?: unknown };
  if (choices !== undefined && choices !== null && !Array.isArray(choices)) {
    throw new UnreadableAnswer("The model provider's answer could not be read: its choices are not a list");
  }
  return data as Record<string, unknown>;
}

/**
 * A whole completion as the one chunk that carries all of it: what a provider that ignores
 * `stream: true` answers (JSON, not an event stream), read like a streamed one.
 */
function completionAsChunk(completion: ChatCompletion): ChatCompletionChunk {
  return {
    ...completion,
    object: 'chat.completion.chunk',
    choices: (completion.choices ?? []).map(({ index, message, finish_reason }) => ({
      index,
      finish_reason,
      delta: {
        role: 'assistant',
        content: message?.content ?? null,
        ...(Array.isArray(message?.tool_calls) && {
          tool_calls: message.tool_calls.map((call, i) => ({ ...call, index: i })),
        }),
      },
    })),
  } as ChatCompletionChunk;
}

/** The chunks of an answer, until `[DONE]` (what follows it is read, not used). */
async function* completionChunks(answer: ModelHttpAnswer): AsyncGenerator<ChatCompletionChunk> {
  if (!answer.body) return;
  if (/^application\/json\b/i.test(String(answer.headers['content-type'] ?? ''))) {
    // Bounded in all by the transport (an answer of the largest size allowed fits).
    yield completionAsChunk(answerObject(await answerText(answer), false) as unknown as ChatCompletion);
    return;
  }
  let done = false;
  for await (const e of serverEvents(answer.body)) {
    if (done) continue;
    if (e.data.startsWith('[DONE]')) {
      done = true;
      continue;
    }
    yield answerObject(e.data, e.event === 'error') as unknown as ChatCompletionChunk;
  }
}

/** The model client of the configuration; undefined when no provider key is configured. */
export function createModelClient(config: Config['model']): ModelClient | undefined {
  const apiKey = config.apiKey;
  if (!apiKey) return undefined;
  // Every answer is read through the byte bound, so no single line of it can grow unbounded.
  const transport = modelTransport({ maxBodyBytes: modelEventBytes(config.maxOutputChars) });
  const url = new URL(`${config.baseUrl.replace(/\/+$/, '')}/chat/completions`);
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json',
    authorization: `Bearer ${apiKey}`,
  };
  const attempts = MODEL_MAX_RETRIES + 1;
  /** A provider's text, shown in a run's error: cut short, and never the service's key. */
  const shown = (text: string) => redact(text, [apiKey]).slice(0, MAX_PROVIDER_MESSAGE);
  const failed = (failure: RequestFailure): ModelStep => {
    switch (failure.kind) {
      case 'timeout':
        return {
          ok: false,
          errorType: 'timeout',
          message: `The model provider did not start answering within ${Math.round(config.requestTimeoutMs / 1000)} s (${attempts} attempts)`,
        };
      case 'unreachable':
        return {
          ok: false,
          errorType: 'provider_error',
          message: `The model provider at ${config.baseUrl} could not be reached (${attempts} attempts): ${shown(failure.detail)}`,
        };
      case 'refused':
        return {
          ok: false,
          errorType: 'provider_error',
          message: `The model provider refused the request (HTTP ${failure.status}): ${shown(providerMessage(failure.body))}`,
        };
      case 'too_large':
        return {
          ok: false,
          errorType: 'provider_error',
          message: `The model provider answered with more than ${formatBytes(failure.error.maxBytes)}`,
        };
    }
  };

  return {
    async step({ model, messages, tools, maxTokens, responseFormat }, signal) {
      const answer = new AnswerBuilder(config.maxOutputChars);
      const bound = maxTokens ?? (config.maxOutputTokens > 0 ? config.maxOutputTokens : undefined);
      const body = JSON.stringify({
        model,
        messages,
        ...(tools.length > 0 && { tools }),
        ...(bound !== undefined && { max_tokens: bound }),
        ...(responseFormat && { response_format: responseFormat }),
        stream: true,
        stream_options: { include_usage: true },
      });
      // Stopped before the provider answered: nothing to record (no figure of what it did); the
      // rejection (the signal's reason) is the executor's to read.
      const sent = await postWithRetries(transport, {
        url,
        headers,
        body,
        timeoutMs: config.requestTimeoutMs,
        signal,
      });
      if (!sent.ok) return failed(sent.failure);
      try {
        // Leaving the loop early ends the transfer: the provider stops generating.
        for await (const chunk of completionChunks(sent.answer)) if (!answer.add(chunk)) break;
      } catch (err) {
        // Cut off by the run's stop (cancel, lost lease, time-out, end of a shutdown's grace
        // period): the answer is returned all the same (its usage, or an estimate when its last
        // chunk had not come): the provider has charged for it, and the executor records it
        // before it looks at the signal again.
        if (signal.aborted) return cutOffStep(answer, messages, tools);
        if (err instanceof UnreadableAnswer) {
          return { ok: false, errorType: 'provider_error', message: shown(err.message) };
        }
        // An event past the byte bound: the answer is stopped, its usage estimated.
        if (tooLargeIn(err)) {
          const { message } = answer.result();
          const usage = estimatedUsage(answer, messages, tools);
          return { ok: true, message, usage, providerCallId: answer.id, limit: 'bytes' };
        }
        // The connection lost mid-answer: not retried (the provider may have charged for it).
        return {
          ok: false,
          errorType: 'provider_error',
          message: `The model provider's answer was cut off: ${shown((err as Error).message || String(err))}`,
        };
      }
      if (signal.aborted) return cutOffStep(answer, messages, tools);
      const { message, limit } = answer.result();
      const providerCallId = answer.id;
      if (limit === 'chars' || limit === 'tool_calls') {
        return { ok: true, message, usage: estimatedUsage(answer, messages, tools), providerCallId, limit };
      }
      return { ok: true, message, usage: usageOf(answer.usage), providerCallId, ...(limit && { limit }) };
    },
  };
}
