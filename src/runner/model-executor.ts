// Executes a run: the task's prompt with its skills and time context goes to the model; the
// tools of its sources are offered, and the model's tool calls are executed and their results
// fed back until it answers, within the step limit.
import type {
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
} from 'openai/resources/chat/completions';
import { catalogCostCents, type ModelCatalog } from '../domain/models.ts';
import { RunBudget } from './cost-cap.ts';
import type { RunErrorType, RunExecutor, RunJob, RunResult } from './executor.ts';
import { type AnswerLimits, markedOutput, modelEventBytes, stoppedMessage } from './model-answer.ts';
import { createModelClient, type ModelClient, type ModelRequest, type StepUsage } from './model-client.ts';
import { outputCheckError } from './output-checks.ts';
import { assembleMessages, missingRequiredSources, outputSchemaInstruction } from './prompt.ts';
import { openRunSources, type SourceDeps } from './run-sources.ts';
import { Toolbox } from './toolbox.ts';
import type { ConnectErrorType } from './tools/types.ts';

export interface ExecutorDeps extends SourceDeps {
  models: ModelCatalog;
}

interface Totals {
  tokensUsed: number;
  costCents: number;
}

const failure = (
  errorType: RunErrorType,
  message: string,
  totals: Totals = { tokensUsed: 0, costCents: 0 },
  output?: string | null,
) => ({ ok: false, errorType, message, ...totals, ...(output && { output }) }) satisfies RunResult;

/** How a source that would not connect fails the run. */
function sourceFailure(errorType: ConnectErrorType): RunErrorType {
  switch (errorType) {
    case 'not_configured':
      return 'not_configured';
    case 'refused':
      return 'invalid_task';
    case 'auth_failed':
    case 'unreachable':
    case 'timeout':
    case 'protocol_error':
      return 'source_error';
  }
}

export function modelExecutor(deps: ExecutorDeps): RunExecutor {
  const client = createModelClient(deps.config.model);

  return {
    async execute(job: RunJob, signal: AbortSignal): Promise<RunResult> {
      const { task, skills, sources } = job.context;
      // A replay may run with a model of its own (runs.model); every other run, the task's.
      const modelId = job.run.model ?? task.model;
      if (!client) {
        return failure(
          'not_configured',
          'No model provider is configured: set SVC_MODEL_API_KEY (and SVC_MODEL_BASE_URL for a provider other than the default router), then run the task again',
        );
      }
      const model = deps.models.find(modelId);
      const whose = job.run.model === null ? "The task's model" : "The replay's model";
      if (!model) {
        return failure(
          'invalid_task',
          `${whose} "${modelId}" is not in the model catalog; choose another model`,
        );
      }
      if (sources.length > 0 && !model.supportsToolCalling) {
        return failure(
          'invalid_task',
          `The task has sources attached, but ${whose.toLowerCase()} "${modelId}" does not support tool calling; choose a model that does or detach the sources`,
        );
      }
      const [missing] = missingRequiredSources(skills, sources);
      if (missing) {
        return failure(
          'invalid_task',
          `Skill "${missing.skill}" requires the source "${missing.source}", which is not attached to the task; attach a source with that slug or detach the skill`,
        );
      }

      const cap = task.max_cost_cents_per_run === null ? null : Number(task.max_cost_cents_per_run);
      const budget = new RunBudget(cap, model, deps.config.model.maxOutputTokens);
      // A cap of 0 pays for nothing: no source is connected, no model asked.
      if (cap === 0) return failure('cost_limit', budget.unaffordable(0, 0));

      const messages: ChatCompletionMessageParam[] = assembleMessages(
        skills,
        task.prompt,
        task.timezone,
        // A replay is told the time its original was told: the original's slot, or when it
        // was created if it ran on demand.
        job.run.replay_context_at ?? job.startedAt,
        job.run.slot_at ?? job.run.replay_slot_at,
      );
      const schema = task.output_schema;
      const structured = schema !== null && model.supportsStructuredOutput === true;
      // Without structured output the schema is asked for in words, just before the prompt.
      if (schema && !structured) messages.splice(-1, 0, outputSchemaInstruction(schema));
      const opened = sources.length > 0 ? await openRunSources(deps, sources, signal, task.id) : undefined;
      if (opened && !opened.ok) return failure(sourceFailure(opened.errorType), opened.message);
      try {
        const tooMany = opened?.toolbox.boundsProblem();
        if (tooMany) return failure('invalid_task', tooMany);
        const toolbox = opened?.toolbox ?? new Toolbox();
        const result = await toolLoop(client, {
          routerModelId: model.routerModelId,
          budget,
          ...(structured && {
            responseFormat: {
              type: 'json_schema',
              json_schema: { name: 'run_output', schema, strict: false },
            },
          }),
          cost: (usage) =>
            usage.costUsd !== undefined
              ? usage.costUsd * 100
              : catalogCostCents(model, usage.promptTokens, usage.completionTokens),
          maxSteps: deps.config.model.maxSteps,
          outputLimits: {
            ...deps.config.model,
            maxEventBytes: modelEventBytes(deps.config.model.maxOutputChars),
          },
          record: job.recordUsage,
          // With a source open, closing it is still part of the execution.
          ...(!opened && job.executionDone && { lastAnswer: job.executionDone }),
          messages,
          toolbox,
          ...(opened && { lostSignIn: opened.lostSignIn }),
          signal,
        });
        if (!result.ok) return result;
        const checkFailed = await outputCheckError(task, result.output, toolbox.calledTools());
        if (checkFailed) {
          const { tokensUsed, costCents } = result;
          return failure('output_check', checkFailed, { tokensUsed, costCents }, result.output);
        }
        return result;
      } finally {
        await opened?.close();
      }
    },
  };
}

interface LoopInput {
  routerModelId: string;
  /** The task's cost cap: each call's max_tokens, and where the loop stops. */
  budget: RunBudget;
  responseFormat?: ModelRequest['responseFormat'];
  /** Cents of one step: a provider-reported cost wins over the catalog's prices. */
  cost(usage: StepUsage): number;
  maxSteps: number;
  outputLimits: AnswerLimits;
  /** Writes one call's usage to the ledger; awaited before the answer is acted on. */
  record: RunJob['recordUsage'];
  /** Told when an answer with no tool call arrives: no model call follows it. */
  lastAnswer?: () => void;
  messages: ChatCompletionMessageParam[];
  toolbox: Toolbox;
  /** An oauth source whose sign-in ran out during the run (its refresh failed), if one did. */
  lostSignIn?: () => { errorType: ConnectErrorType; message: string } | undefined;
  signal: AbortSignal;
}

async function toolLoop(client: ModelClient, input: LoopInput): Promise<RunResult> {
  const { messages, toolbox, signal } = input;
  const totals: Totals = { tokensUsed: 0, costCents: 0 };
  const tools = toolbox.definitions();
  const { budget } = input;
  /** The model's last text, kept on a run the cap stops. */
  let lastText: string | null = null;
  try {
    for (let step = 1; step <= input.maxSteps; step++) {
      const next = budget.nextCall(totals.costCents, messages, tools);
      if (!next.ok) return failure('cost_limit', next.message, totals, lastText);
      const answer = await client.step(
        {
          model: input.routerModelId,
          messages,
          tools,
          maxTokens: next.maxTokens,
          responseFormat: input.responseFormat,
        },
        signal,
      );
      if (!answer.ok) return failure(answer.errorType, answer.message, totals);
      const call = { tokensUsed: answer.usage.totalTokens, costCents: input.cost(answer.usage) };
      totals.tokensUsed += call.tokensUsed;
      totals.costCents += call.costCents;
      // No model call follows an answer without tool calls (the run ends, whatever the checks
      // below say): its place can go to the next run while the answer is recorded.
      if (!answer.message.tool_calls?.some((c) => c.type === 'function')) input.lastAnswer?.();
      // The provider has charged for this answer: on the ledger before anything else happens.
      await input.record({ providerCallId: answer.providerCallId, ...call });
      // An answer that arrived as the run was stopped is recorded, never acted on.
      signal.throwIfAborted();
      budget.answered(answer.usage, messages.length);
      lastText = answer.message.content || lastText;

      const calls = (answer.message.tool_calls ?? []).filter(
        (c): c is Extract<ChatCompletionMessageToolCall, { type: 'function' }> => c.type === 'function',
      );
      const stopped = stoppedMessage(answer.limit, calls.length > 0, input.outputLimits);
      if (stopped) return failure('output_limit', stopped, totals);
      if (calls.length === 0) {
        const limits = { ...input.outputLimits, maxOutputTokens: next.maxTokens ?? 0 };
        const output = markedOutput(answer.message.content ?? '', answer.limit, limits);
        // Cut short by the max_tokens the cap left: the answer is incomplete because of the cap.
        if (answer.limit === 'max_tokens' && next.capBinds)
          return failure('cost_limit', budget.cutMessage(totals.costCents, next.maxTokens), totals, output);
        return { ok: true, output, ...totals };
      }
      // The step that reached the cap is the last: its tool calls are not made (the model
      // could not be asked about their results).
      if (budget.reached(totals.costCents))
        return failure('cost_limit', budget.reachedMessage(totals.costCents), totals, lastText);

      messages.push({ role: 'assistant', content: answer.message.content ?? null, tool_calls: calls });
      // The calls of one step are independent (the model asked for them together): run them at
      // once, a few at a time (Toolbox.callAll).
      const results = await toolbox.callAll(
        calls.map((c) => c.function),
        signal,
      );
      calls.forEach((c, i) => {
        messages.push({ role: 'tool', tool_call_id: c.id, content: results[i] ?? '' });
      });
      // A source whose sign-in ran out during these calls fails the run as it would have at
      // connect time (naming the source, saying to reconnect): the model is not asked again.
      const lost = input.lostSignIn?.();
      if (lost) return failure(sourceFailure(lost.errorType), lost.message, totals, lastText);
    }
  } catch (err) {
    // Aborted (timeout, lost lease, shutdown): the worker decides what happened; what was
    // spent so far is still reported.
    if (signal.aborted) return failure('timeout', 'The run was stopped', totals);
    throw err;
  }
  return failure(
    'step_limit',
    `The model was still calling tools after ${input.maxSteps} steps, the limit of a run (SVC_MAX_TOOL_STEPS); simplify the task or raise the limit`,
    totals,
  );
}
