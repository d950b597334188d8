// One model call over the OpenAI-compatible Chat Completions API, through the official
// `openai` SDK. The SDK retries 408/409/429/5xx, lost connections and timeouts with
// exponential backoff and jitter, honouring Retry-After (and retry-after-ms).
//
// Answers are streamed: the request timeout then bounds the wait for the answer to start, not
// its length, so a long answer is never cut off and retried while a provider that accepts the
// connection but never answers is retried after SVC_MODEL_TIMEOUT_SECONDS. What bounds the
// length is max_tokens (SVC_MAX_OUTPUT_TOKENS), and, for a provider that ignores it, the
// answer's characters (SVC_MAX_OUTPUT_CHARS): past them the stream is stopped, never retried.
import OpenAI from 'openai';
import type {
  ChatCompletionMessage,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { ResponseFormatJSONSchema } from 'openai/resources/shared';
import type { Config } from '../config.ts';
import { formatBytes, tooLargeIn } from './capped-response.ts';
import { AnswerBuilder, type AnswerLimit, modelEventBytes, type WireUsage } from './model-answer.ts';
import { modelTransport } from './model-transport.ts';

/** Retries of one model request after the first attempt (429, 5xx, timeouts, lost connections). */
export const MODEL_MAX_RETRIES = 4;
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

/** Settles with the promise, or rejects as soon as the signal aborts (the SDK's retry sleeps do not). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  // The SDK rejects the promise too when the signal aborts (already aborted: at once). It must
  // be observed here: an unhandled rejection would end the whole process.
  promise.catch(() => undefined);
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** The model client of the configuration; undefined when no provider key is configured. */
export function createModelClient(config: Config['model']): ModelClient | undefined {
  if (!config.apiKey) return undefined;
  const client = new OpenAI({
    apiKey: config.apiKey,
    baseURL: config.baseUrl,
    maxRetries: MODEL_MAX_RETRIES,
    timeout: config.requestTimeoutMs,
    // Every answer is read through the byte bound, so no single line of it can grow unbounded.
    fetch: modelTransport({ maxBodyBytes: modelEventBytes(config.maxOutputChars) }),
  });

  return {
    async step({ model, messages, tools, maxTokens, responseFormat }, signal) {
      const answer = new AnswerBuilder(config.maxOutputChars);
      const bound = maxTokens ?? (config.maxOutputTokens > 0 ? config.maxOutputTokens : undefined);
      let streaming = false;
      try {
        const stream = await untilAborted(
          client.chat.completions.create(
            {
              model,
              messages,
              ...(tools.length > 0 && { tools }),
              ...(bound !== undefined && { max_tokens: bound }),
              ...(responseFormat && { response_format: responseFormat }),
              stream: true,
              stream_options: { include_usage: true },
            },
            { signal },
          ),
          signal,
        );
        streaming = true;
        // Leaving the loop early aborts the request: the provider stops generating.
        for await (const chunk of stream) if (!answer.add(chunk)) break;
        // The SDK ends the iteration quietly when the request is aborted. The answer is returned
        // all the same (its usage, or an estimate when its last chunk had not come): the
        // provider has charged for it, and the executor records it before it looks at the
        // signal again.
        if (signal.aborted) return cutOffStep(answer, messages, tools);
        const { message, limit } = answer.result();
        const providerCallId = answer.id;
        if (limit === 'chars' || limit === 'tool_calls') {
          return { ok: true, message, usage: estimatedUsage(answer, messages, tools), providerCallId, limit };
        }
        return { ok: true, message, usage: usageOf(answer.usage), providerCallId, ...(limit && { limit }) };
      } catch (err) {
        // Stopped before the provider answered: nothing to record (no figure of what it did).
        if (signal.aborted) {
          if (streaming) return cutOffStep(answer, messages, tools);
          throw err;
        }
        // An event past the byte bound: the answer is stopped, its usage estimated. Before the
        // stream started it was an error body: no answer at all.
        const tooLarge = tooLargeIn(err);
        if (tooLarge && streaming) {
          const { message } = answer.result();
          const usage = estimatedUsage(answer, messages, tools);
          return { ok: true, message, usage, providerCallId: answer.id, limit: 'bytes' };
        }
        if (tooLarge) {
          return {
            ok: false,
            errorType: 'provider_error',
            message: `The model provider answered with more than ${formatBytes(tooLarge.maxBytes)}`,
          };
        }
        if (err instanceof OpenAI.APIConnectionTimeoutError) {
          return {
            ok: false,
            errorType: 'timeout',
            message: `The model provider did not start answering within ${Math.round(config.requestTimeoutMs / 1000)} s (${MODEL_MAX_RETRIES + 1} attempts)`,
          };
        }
        if (err instanceof OpenAI.APIConnectionError) {
          return {
            ok: false,
            errorType: 'provider_error',
            message: `The model provider at ${config.baseUrl} could not be reached (${MODEL_MAX_RETRIES + 1} attempts): ${err.message}`,
          };
        }
        if (err instanceof OpenAI.APIError) {
          const text = (err.message || 'no message').slice(0, MAX_PROVIDER_MESSAGE);
          const status = err.status ? ` (HTTP ${err.status})` : '';
          return {
            ok: false,
            errorType: 'provider_error',
            message: `The model provider refused the request${status}: ${text}`,
          };
        }
        // SyntaxError: a streamed event that is not JSON.
        if (err instanceof OpenAI.OpenAIError || err instanceof SyntaxError) {
          return {
            ok: false,
            errorType: 'provider_error',
            message: `The model provider's answer could not be read: ${err.message.slice(0, MAX_PROVIDER_MESSAGE)}`,
          };
        }
        throw err;
      }
    },
  };
}
