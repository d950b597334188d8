import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import { pageSources, RESOURCE_PAGE } from '../../domain/list-pages.ts';
import { createSource, deleteSource, getSource, updateSource } from '../../domain/sources.ts';
import { testSource } from '../../runner/source-test.ts';
import { errorResponses } from '../../schemas/common.ts';
import { OrganizationPageQuery } from '../../schemas/pagination.ts';
import {
  Source,
  SourceCreateBody,
  SourceIdParams,
  SourceTestResult,
  SourceUpdateBody,
} from '../../schemas/source.ts';
import { created, sendPage } from '../links.ts';
import { type App, principalOf } from '../types.ts';

const tags = ['sources'];

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function sourceRoutes(app: App, deps: Deps): void {
  app.get(
    '/sources',
    {
      schema: {
        operationId: 'listSources',
        description: "The organization's sources, newest first, their secrets masked.",
        tags,
        summary: "List the organization's sources, newest first (secrets masked)",
        querystring: OrganizationPageQuery,
        response: { 200: Type.Array(Source), ...errorResponses(400, 401, 429) },
      },
    },
    async (request, reply) => {
      const { limit = RESOURCE_PAGE.default, cursor } = request.query;
      return sendPage(
        request,
        reply,
        await pageSources(deps, principalOf(request).organizationId, limit, cursor),
      );
    },
  );

  app.post(
    '/sources',
    {
      schema: {
        operationId: 'createSource',
        description:
          'Creates a source of tools for tasks (an MCP server, an HTTP API or a local tool). config.env values and credentials are sealed at rest and never returned.',
        tags,
        summary: 'Create a source; config.env values and credentials are sealed at rest and never returned',
        body: SourceCreateBody,
        response: { 201: Source, ...errorResponses(400, 401, 409, 413, 415, 429) },
      },
    },
    async (request, reply) => {
      const source = await createSource(deps, principalOf(request).organizationId, request.body);
      return created(request, reply, `/api/svc/sources/${source.id}`, source);
    },
  );

  app.get(
    '/sources/:sourceId',
    {
      schema: {
        operationId: 'getSource',
        description: 'One source, its secrets masked.',
        tags,
        summary: 'Get a source (secrets masked)',
        params: SourceIdParams,
        response: { 200: Source, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => getSource(deps, principalOf(request).organizationId, request.params.sourceId),
  );

  app.patch(
    '/sources/:sourceId',
    {
      schema: {
        operationId: 'updateSource',
        description: 'Changes the fields sent; a secret sent back as its mask keeps its stored value.',
        tags,
        summary: 'Update a source; a secret sent back as its mask keeps its stored value',
        params: SourceIdParams,
        body: SourceUpdateBody,
        response: { 200: Source, ...errorResponses(400, 401, 404, 412, 413, 415, 429) },
      },
    },
    async (request) =>
      updateSource(
        deps,
        principalOf(request).organizationId,
        request.params.sourceId,
        request.body,
        request.headers['if-match'],
      ),
  );

  app.delete(
    '/sources/:sourceId',
    {
      schema: {
        operationId: 'deleteSource',
        description: 'Deletes the source; the tasks it was attached to run without it.',
        tags,
        summary: 'Delete a source (tasks it was attached to lose it)',
        params: SourceIdParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 401, 404, 412, 429) },
      },
    },
    async (request, reply) => {
      const organizationId = principalOf(request).organizationId;
      await deleteSource(deps, organizationId, request.params.sourceId, request.headers['if-match']);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/sources/:sourceId/test',
    {
      schema: {
        operationId: 'testSource',
        description:
          'Connects to the source and lists its tools. A failed connection is a 200 with success false and a message, not an error.',
        tags,
        summary:
          'Connect to the source for real and list its tools; a failed connection is success false with a message',
        params: SourceIdParams,
        response: { 200: SourceTestResult, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => testSource(deps, principalOf(request).organizationId, request.params.sourceId),
  );
}
