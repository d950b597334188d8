import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import { pageSkills, RESOURCE_PAGE } from '../../domain/list-pages.ts';
import { createSkill, deleteSkill, getSkill, updateSkill } from '../../domain/skills.ts';
import { errorResponses } from '../../schemas/common.ts';
import { OrganizationPageQuery } from '../../schemas/pagination.ts';
import { Skill, SkillCreateBody, SkillIdParams, SkillUpdateBody } from '../../schemas/skill.ts';
import { created, sendPage } from '../links.ts';
import { type App, principalOf } from '../types.ts';

const tags = ['skills'];

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function skillRoutes(app: App, deps: Deps): void {
  app.get(
    '/skills',
    {
      schema: {
        operationId: 'listSkills',
        description: "The organization's skills, newest first.",
        tags,
        summary: "List the organization's skills, newest first",
        querystring: OrganizationPageQuery,
        response: { 200: Type.Array(Skill), ...errorResponses(400, 401, 429) },
      },
    },
    async (request, reply) => {
      const { limit = RESOURCE_PAGE.default, cursor } = request.query;
      return sendPage(
        request,
        reply,
        await pageSkills(deps, principalOf(request).organizationId, limit, cursor),
      );
    },
  );

  app.post(
    '/skills',
    {
      schema: {
        operationId: 'createSkill',
        description:
          'Creates a skill: Markdown instructions that tasks attach to their prompt. The slug is made from the name when not given; 409 when it is taken.',
        tags,
        summary: 'Create a skill (its slug is generated from the name when not given)',
        body: SkillCreateBody,
        response: { 201: Skill, ...errorResponses(400, 401, 409, 413, 415, 429) },
      },
    },
    async (request, reply) => {
      const skill = await createSkill(deps, principalOf(request).organizationId, request.body);
      return created(request, reply, `/api/svc/skills/${skill.id}`, skill);
    },
  );

  app.get(
    '/skills/:skillId',
    {
      schema: {
        operationId: 'getSkill',
        description: 'One skill with its content and version.',
        tags,
        summary: 'Get a skill',
        params: SkillIdParams,
        response: { 200: Skill, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => getSkill(deps, principalOf(request).organizationId, request.params.skillId),
  );

  app.patch(
    '/skills/:skillId',
    {
      schema: {
        operationId: 'updateSkill',
        description: 'Changes the fields sent; a change of content raises the version by one.',
        tags,
        summary: 'Update a skill; a change of content raises its version by one',
        params: SkillIdParams,
        body: SkillUpdateBody,
        response: { 200: Skill, ...errorResponses(400, 401, 404, 412, 413, 415, 429) },
      },
    },
    async (request) =>
      updateSkill(
        deps,
        principalOf(request).organizationId,
        request.params.skillId,
        request.body,
        request.headers['if-match'],
      ),
  );

  app.delete(
    '/skills/:skillId',
    {
      schema: {
        operationId: 'deleteSkill',
        description: 'Deletes the skill; the tasks it was attached to run without it.',
        tags,
        summary: 'Delete a skill (tasks it was attached to lose it)',
        params: SkillIdParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 401, 404, 412, 429) },
      },
    },
    async (request, reply) => {
      const organizationId = principalOf(request).organizationId;
      await deleteSkill(deps, organizationId, request.params.skillId, request.headers['if-match']);
      return reply.code(204).send(null);
    },
  );
}
