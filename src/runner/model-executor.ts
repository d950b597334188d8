// Executes a run with one model call over the OpenAI-compatible Chat Completions API.
// The official `openai` SDK does the HTTP: it retries 408/409/429/5xx and connection errors
// with exponential backoff and jitter, honouring Retry-After.
import OpenAI from 'openai';
import type { Config } from '../config.ts';
import { catalogCostCents, type ModelCatalog } from '../domain/models.ts';
import type { RunExecutor, RunJob, RunResult } from './executor.ts';
import { assembleMessages } from './prompt.ts';

/** Retries of one model request after the first attempt (429, 5xx, timeouts, lost connections). */
const MODEL_MAX_RETRIES = 4;
/** Provider error text kept in a run's `error` (provider messages can be long). */
const MAX_PROVIDER_MESSAGE = 500;

/** OpenRouter-style usage: `cost` is the provider-reported charge in US dollars. */
interface UsageWithCost {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  cost?: number;
}

const failure = (errorType: Exclude<RunResult, { ok: true }>['errorType'], message: string): RunResult => ({
  ok: false,
  errorType,
  message,
  tokensUsed: 0,
  costCents: 0,
});

export function modelExecutor(config: Config, models: ModelCatalog): RunExecutor {
  const apiKey = config.model.apiKey;
  const client =
    apiKey &&
    new OpenAI({
      apiKey,
      baseURL: config.model.baseUrl,
      maxRetries: MODEL_MAX_RETRIES,
      timeout: config.worker.runTimeoutMs,
    });

  return {
    async execute(job: RunJob, signal: AbortSignal): Promise<RunResult> {
      const { task, skills, sources } = job.context;
      if (!client) {
        return failure(
          'not_configured',
          'No model provider is configured: set SVC_MODEL_API_KEY (and SVC_MODEL_BASE_URL for a provider other than the default router), then run the task again',
        );
      }
      const model = models.find(task.model);
      if (!model) {
        return failure(
          'invalid_task',
          `The task's model "${task.model}" is not in the model catalog; choose another model`,
        );
      }
      if (sources.length) {
        return failure(
          'unsupported',
          `The task has ${sources.length} source(s) attached, and calling tools from sources is not available in this version; detach the sources to run the task`,
        );
      }
      const messages = assembleMessages(skills, task.prompt, task.timezone, job.startedAt, job.run.slot_at);
      try {
        const completion = await client.chat.completions.create(
          { model: model.routerModelId, messages },
          { signal },
        );
        const usage = (completion.usage ?? {}) as UsageWithCost;
        const promptTokens = usage.prompt_tokens ?? 0;
        const completionTokens = usage.completion_tokens ?? 0;
        const tokensUsed = usage.total_tokens ?? promptTokens + completionTokens;
        // A provider-reported cost wins over the catalog's prices.
        const costCents =
          typeof usage.cost === 'number' && Number.isFinite(usage.cost)
            ? usage.cost * 100
            : catalogCostCents(model, promptTokens, completionTokens);
        const output = completion.choices[0]?.message?.content ?? '';
        return { ok: true, output, tokensUsed, costCents };
      } catch (err) {
        if (signal.aborted) throw err;
        if (err instanceof OpenAI.APIConnectionTimeoutError) {
          return failure('timeout', 'The model provider did not answer in time (after retries)');
        }
        if (err instanceof OpenAI.APIError) {
          const text = (err.message || 'no message').slice(0, MAX_PROVIDER_MESSAGE);
          const status = err.status ? ` (HTTP ${err.status})` : '';
          return failure('provider_error', `The model provider refused the request${status}: ${text}`);
        }
        throw err;
      }
    },
  };
}
