import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import { pageRuns, pageTaskRuns, RECORD_PAGE } from '../../domain/list-pages.ts';
import { cancelRun, replayRun } from '../../domain/run-control.ts';
import { getRun, redeliverRun } from '../../domain/runs.ts';
import { errorResponses, OrganizationListQuery } from '../../schemas/common.ts';
import {
  ReplayBody,
  Run,
  RunIdParams,
  RunWithDeliveries,
  TaskRunsParams,
  TaskRunsQuery,
} from '../../schemas/run.ts';
import { sendPage } from '../links.ts';
import { type App, principalOf } from '../types.ts';

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function runRoutes(app: App, deps: Deps): void {
  app.get(
    '/runs',
    {
      schema: {
        operationId: 'listRuns',
        description: 'Runs of every task of the organization, newest first, at most `limit` of them.',
        tags: ['runs'],
        summary: "The organization's runs across all tasks, newest first",
        querystring: OrganizationListQuery,
        response: { 200: Type.Array(Run), ...errorResponses(400, 401, 429) },
      },
    },
    async (request, reply) => {
      const { limit = RECORD_PAGE.default, cursor } = request.query;
      return sendPage(
        request,
        reply,
        await pageRuns(deps, principalOf(request).organizationId, limit, cursor),
      );
    },
  );

  app.get(
    '/runs/:runId',
    {
      schema: {
        operationId: 'getRun',
        description: 'One run with its output, cost and error, and each delivery with its attempts.',
        tags: ['runs'],
        summary: 'One run, with its deliveries and their attempts',
        params: RunIdParams,
        response: { 200: RunWithDeliveries, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => getRun(deps, principalOf(request).organizationId, request.params.runId),
  );

  app.post(
    '/runs/:runId/redeliver',
    {
      schema: {
        operationId: 'redeliverRun',
        description:
          "Starts a new round of the retry schedule for the run's failed deliveries. 409 when the run has none.",
        tags: ['runs'],
        summary: "Retry the run's failed deliveries (a new round of the retry schedule)",
        params: RunIdParams,
        response: { 202: RunWithDeliveries, ...errorResponses(400, 401, 404, 409, 429) },
      },
    },
    async (request, reply) => {
      const run = await redeliverRun(deps, principalOf(request).organizationId, request.params.runId);
      reply.code(202);
      return run;
    },
  );

  app.post(
    '/runs/:runId/cancel',
    {
      schema: {
        operationId: 'cancelRun',
        description:
          'Cancels a pending or running run: it ends failed with the error "Canceled by request". 409 when the run has already ended.',
        tags: ['runs'],
        summary: 'Cancel a pending or running run: it ends failed, its error "Canceled by request"',
        params: RunIdParams,
        response: { 202: Run, ...errorResponses(400, 401, 404, 409, 429) },
      },
    },
    async (request, reply) => {
      const run = await cancelRun(deps, principalOf(request).organizationId, request.params.runId);
      reply.code(202);
      return run;
    },
  );

  app.post(
    '/runs/:runId/replay',
    {
      schema: {
        operationId: 'replayRun',
        description:
          "Queues a new run of the run's task with the time context of the original run, optionally with another model, and answers it (202).",
        tags: ['runs'],
        summary: "Run the task again with the run's time context (optionally another model)",
        params: RunIdParams,
        body: ReplayBody,
        response: { 202: Run, ...errorResponses(400, 401, 403, 404, 409, 429) },
      },
      // The body is optional: a POST without one is validated as `{}`.
      preValidation: async (request) => {
        request.body ??= {};
      },
    },
    async (request, reply) => {
      const run = await replayRun(
        deps,
        principalOf(request).organizationId,
        request.params.runId,
        request.body,
      );
      reply.code(202);
      return run;
    },
  );

  app.get(
    '/tasks/:taskId/runs',
    {
      schema: {
        operationId: 'listTaskRuns',
        description: "The task's runs, newest first, at most `limit` of them.",
        tags: ['runs'],
        summary: "A task's runs, newest first",
        params: TaskRunsParams,
        querystring: TaskRunsQuery,
        response: { 200: Type.Array(Run), ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request, reply) => {
      const { limit = RECORD_PAGE.default, cursor } = request.query;
      const org = principalOf(request).organizationId;
      return sendPage(request, reply, await pageTaskRuns(deps, org, request.params.taskId, limit, cursor));
    },
  );
}
