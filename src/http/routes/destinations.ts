import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import {
  addDestination,
  changeDestination,
  listDestinations,
  removeDestination,
} from '../../domain/destinations.ts';
import { errorResponses } from '../../schemas/common.ts';
import {
  Destination,
  DestinationIdParams,
  DestinationInput,
  DestinationPatch,
  TaskIdParams,
} from '../../schemas/task.ts';
import { created } from '../links.ts';
import { type App, principalOf } from '../types.ts';

const tags = ['destinations'];

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function destinationRoutes(app: App, deps: Deps): void {
  app.get(
    '/tasks/:taskId/destinations',
    {
      schema: {
        operationId: 'listDestinations',
        description:
          'Where the results of the task are delivered: email addresses, phone numbers and webhook URLs, each with when it is delivered to.',
        tags,
        summary: "List a task's destinations",
        params: TaskIdParams,
        response: { 200: Type.Array(Destination), ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => listDestinations(deps, principalOf(request).organizationId, request.params.taskId),
  );

  app.post(
    '/tasks/:taskId/destinations',
    {
      schema: {
        operationId: 'createDestination',
        description:
          'Adds one destination to the task. 409 when the task already has the most destinations it may have.',
        tags,
        summary: 'Add a destination to a task',
        params: TaskIdParams,
        body: DestinationInput,
        response: { 201: Destination, ...errorResponses(400, 401, 404, 409, 413, 415, 429) },
      },
    },
    async (request, reply) => {
      const d = await addDestination(
        deps,
        principalOf(request).organizationId,
        request.params.taskId,
        request.body,
      );
      return created(request, reply, `/api/svc/tasks/${request.params.taskId}/destinations/${d.id}`, d);
    },
  );

  app.patch(
    '/tasks/:taskId/destinations/:destinationId',
    {
      schema: {
        operationId: 'updateDestination',
        description: 'Changes the fields sent of one destination of the task.',
        tags,
        summary: 'Change a destination',
        params: DestinationIdParams,
        body: DestinationPatch,
        response: { 200: Destination, ...errorResponses(400, 401, 404, 413, 415, 429) },
      },
    },
    async (request) =>
      changeDestination(
        deps,
        principalOf(request).organizationId,
        request.params.taskId,
        request.params.destinationId,
        request.body,
      ),
  );

  app.delete(
    '/tasks/:taskId/destinations/:destinationId',
    {
      schema: {
        operationId: 'deleteDestination',
        description: 'Removes one destination from the task; later runs are no longer delivered to it.',
        tags,
        summary: 'Remove a destination',
        params: DestinationIdParams,
        response: { 204: Type.Null({ description: 'Removed' }), ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request, reply) => {
      await removeDestination(
        deps,
        principalOf(request).organizationId,
        request.params.taskId,
        request.params.destinationId,
      );
      return reply.code(204).send(null);
    },
  );
}
