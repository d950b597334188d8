import { Type } from 'typebox';
import type { Deps } from '../../domain/deps.ts';
import { pageSlotRecords, RECORD_PAGE } from '../../domain/list-pages.ts';
import { previewSchedule, taskUpcomingSlots } from '../../domain/slot-records.ts';
import { errorResponses } from '../../schemas/common.ts';
import {
  SchedulePreviewBody,
  SlotListQuery,
  SlotRecord,
  UpcomingQuery,
  UpcomingSlot,
} from '../../schemas/slot.ts';
import { TaskIdParams } from '../../schemas/task.ts';
import { sendPage } from '../links.ts';
import { type App, principalOf } from '../types.ts';

const tags = ['tasks'];

// Paths under /api/svc: registered in the API-key scope (app.ts).
export function scheduleRoutes(app: App, deps: Deps): void {
  app.get(
    '/tasks/:taskId/slots',
    {
      schema: {
        operationId: 'listTaskSlots',
        description:
          'Each schedule slot the scheduler passed for the task and what became of it (a run, or why it was skipped), newest first.',
        tags,
        summary: 'What became of each schedule slot the scheduler passed, newest first',
        params: TaskIdParams,
        querystring: SlotListQuery,
        response: { 200: Type.Array(SlotRecord), ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request, reply) => {
      const { limit = RECORD_PAGE.default, cursor } = request.query;
      const org = principalOf(request).organizationId;
      return sendPage(request, reply, await pageSlotRecords(deps, org, request.params.taskId, limit, cursor));
    },
  );

  app.get(
    '/tasks/:taskId/upcoming',
    {
      schema: {
        operationId: 'listUpcomingSlots',
        description:
          "The task's next `count` slots in UTC and in the task's timezone, with notes where a daylight saving change moves or skips one.",
        tags,
        summary: "The task's next slots, in UTC and in its timezone, with DST notes",
        params: TaskIdParams,
        querystring: UpcomingQuery,
        response: { 200: Type.Array(UpcomingSlot), ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) =>
      taskUpcomingSlots(
        deps,
        principalOf(request).organizationId,
        request.params.taskId,
        request.query.count,
      ),
  );

  app.post(
    '/schedules/preview',
    {
      schema: {
        operationId: 'previewSchedule',
        description:
          'The first slots a task with these schedule fields would get, computed without creating anything.',
        tags,
        summary: 'The first slots a task with these schedule fields would get, without creating one',
        body: SchedulePreviewBody,
        response: { 200: Type.Array(UpcomingSlot), ...errorResponses(400, 401, 413, 415, 429) },
      },
    },
    async (request) => previewSchedule(deps, request.body),
  );
}
