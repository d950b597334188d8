// One model call over the OpenAI-compatible Chat Completions API, through the official
// `openai` SDK. The SDK retries 408/409/429/5xx, lost connections and timeouts with
// exponential backoff and jitter, honouring Retry-After (and retry-after-ms).
//
// Answers are streamed: the request timeout then bounds the wait for the answer to start, not
// its length, so a long answer is never cut off and retried while a provider that accepts the
// connection but never answers is retried after SVC_MODEL_TIMEOUT_SECONDS.
import OpenAI from 'openai';
import type {
  ChatCompletionMessage,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type { Config } from '../config.ts';

/** Retries of one model request after the first attempt (429, 5xx, timeouts, lost connections). */
export const MODEL_MAX_RETRIES = 4;
/** Provider error text kept in a run's `error` (provider messages can be long). */
const MAX_PROVIDER_MESSAGE = 500;

/** Usage of one step; `cost` is the provider-reported charge in US dollars (OpenRouter and others). */
export interface StepUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  costUsd: number | undefined;
}

export type ModelStep =
  | { ok: true; message: ChatCompletionMessage; usage: StepUsage }
  | { ok: false; errorType: 'provider_error' | 'timeout'; message: string };

export interface ModelClient {
  step(
    request: { model: string; messages: ChatCompletionMessageParam[]; tools: ChatCompletionTool[] },
    signal: AbortSignal,
  ): Promise<ModelStep>;
}

interface WireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  cost?: number;
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
  });

  return {
    async step({ model, messages, tools }, signal) {
      let usage: WireUsage | undefined;
      try {
        const stream = client.chat.completions.stream(
          {
            model,
            messages,
            ...(tools.length > 0 && { tools }),
            stream_options: { include_usage: true },
          },
          { signal },
        );
        // The accumulated completion carries no usage: it arrives in the last chunk.
        stream.on('chunk', (chunk) => {
          if (chunk.usage) usage = chunk.usage as WireUsage;
        });
        const completion = await untilAborted(stream.finalChatCompletion(), signal);
        const message = completion.choices[0]?.message;
        if (!message) {
          return {
            ok: false,
            errorType: 'provider_error',
            message: 'The model provider answered with no choice',
          };
        }
        return { ok: true, message, usage: usageOf(usage) };
      } catch (err) {
        if (signal.aborted) throw err;
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
        if (err instanceof OpenAI.OpenAIError) {
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
