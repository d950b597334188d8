import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import { pageTasks, RESOURCE_PAGE } from '../../domain/list-pages.ts';
import { expandTasks } from '../../domain/task-expansion.ts';
import {
  createTask,
  deleteOrganizationTask,
  getTask,
  runTaskNow,
  updateOrganizationTask,
} from '../../domain/tasks.ts';
import { errorResponses } from '../../schemas/common.ts';
import { Run } from '../../schemas/run.ts';
import {
  ExpandQuery,
  Task,
  TaskCreateBody,
  TaskIdParams,
  TaskListQuery,
  TaskUpdateBody,
} from '../../schemas/task.ts';
import { created, sendPage } from '../links.ts';
import { type App, principalOf } from '../types.ts';

const tags = ['tasks'];

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function taskRoutes(app: App, deps: Deps): void {
  app.get(
    '/tasks',
    {
      schema: {
        operationId: 'listTasks',
        description:
          "Every task of the key's organization, newest first. `expand` inlines the attached skills and sources.",
        tags,
        summary: 'List the organization\'s tasks, newest first, a page at a time (Link rel="next")',
        querystring: TaskListQuery,
        response: { 200: Type.Array(Task), ...errorResponses(400, 401, 429) },
      },
    },
    async (request, reply) => {
      const orgId = principalOf(request).organizationId;
      const { limit = RESOURCE_PAGE.default, cursor, expand } = request.query;
      const page = await pageTasks(deps, orgId, limit, cursor);
      return sendPage(request, reply, { ...page, items: await expandTasks(deps, orgId, page.items, expand) });
    },
  );

  app.post(
    '/tasks',
    {
      schema: {
        operationId: 'createTask',
        description:
          "Creates a task with its schedule, prompt, model, skills, sources and destinations. A task counts against the plan's task limit (403 when it is reached).",
        tags,
        summary: 'Create a task',
        body: TaskCreateBody,
        response: { 201: Task, ...errorResponses(400, 401, 403, 413, 415, 429) },
      },
    },
    async (request, reply) => {
      const task = await createTask(deps, principalOf(request).organizationId, request.body);
      return created(request, reply, `/api/svc/tasks/${task.id}`, task);
    },
  );

  app.get(
    '/tasks/:taskId',
    {
      schema: {
        operationId: 'getTask',
        description: 'One task of the organization; `expand` inlines its skills and sources.',
        tags,
        summary: 'Get a task',
        params: TaskIdParams,
        querystring: ExpandQuery,
        response: { 200: Task, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => {
      const orgId = principalOf(request).organizationId;
      const [task] = await expandTasks(
        deps,
        orgId,
        [await getTask(deps, orgId, request.params.taskId)],
        request.query.expand,
      );
      return task;
    },
  );

  app.patch(
    '/tasks/:taskId',
    {
      schema: {
        operationId: 'updateTask',
        description:
          'Changes the fields sent and keeps the others. skillIds, sourceIds and destinations, when sent, replace the whole set; a schedule change recomputes the next run.',
        tags,
        summary: 'Update a task; skillIds, sourceIds and destinations replace the whole set',
        params: TaskIdParams,
        body: TaskUpdateBody,
        response: { 200: Task, ...errorResponses(400, 401, 403, 404, 412, 413, 415, 429) },
      },
    },
    async (request) =>
      updateOrganizationTask(
        deps,
        principalOf(request).organizationId,
        request.params.taskId,
        request.body,
        request.headers['if-match'],
      ),
  );

  app.delete(
    '/tasks/:taskId',
    {
      schema: {
        operationId: 'deleteTask',
        description:
          'Deletes the task with its runs and deliveries. Usage already counted for the billing period stays counted.',
        tags,
        summary: 'Delete a task with its runs (usage already counted stays counted)',
        params: TaskIdParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 401, 404, 412, 429) },
      },
    },
    async (request, reply) => {
      const organizationId = principalOf(request).organizationId;
      await deleteOrganizationTask(deps, organizationId, request.params.taskId, request.headers['if-match']);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/tasks/:taskId/run',
    {
      schema: {
        operationId: 'runTask',
        description:
          "Queues a run of the task now, outside its schedule, and answers the pending run (202). 409 while a run of the task is pending or running, or when its monthly cost limit is reached; 403 when the plan's run limit is.",
        tags,
        summary: 'Run the task now; answers with the pending run',
        params: TaskIdParams,
        response: { 202: Run, ...errorResponses(400, 401, 403, 404, 409, 429) },
      },
    },
    async (request, reply) => {
      const run = await runTaskNow(deps, principalOf(request).organizationId, request.params.taskId);
      reply.code(202);
      return run;
    },
  );
}
