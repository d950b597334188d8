// The API's lists, a page at a time: keyset pages (db/sql/list-pages.ts) in each list's order,
// the next page named by an opaque cursor (cursor.ts). The dashboard keeps the whole lists of
// tasks.ts, skills.ts, sources.ts and runs.ts.
import {
  type PagePosition,
  type Positioned,
  pageRunRows,
  pageSkillRows,
  pageSlotRows,
  pageSourceRows,
  pageTaskRows,
  pageTaskRunRows,
} from '../db/sql/list-pages.ts';
import { taskExistsInOrganization } from '../db/sql/runs.ts';
import { errors } from '../lib/errors.ts';
import type { Run } from '../schemas/run.ts';
import type { Skill } from '../schemas/skill.ts';
import type { SlotRecord } from '../schemas/slot.ts';
import type { Source } from '../schemas/source.ts';
import type { Task } from '../schemas/task.ts';
import { type ListName, openCursor, sealCursor } from './cursor.ts';
import type { Deps } from './deps.ts';
import { runView } from './runs.ts';
import { skillView } from './skills.ts';
import { slotRecordView } from './slot-records.ts';
import { sourceView } from './sources.ts';
import { taskView } from './tasks.ts';

/** Page sizes of the tasks, skills and sources lists (the run lists and slots keep 20 and 100). */
export const RESOURCE_PAGE = { default: 100, max: 100 } as const;
/** Page sizes of the run lists and the slot record, the interface specification's `limit`. */
export const RECORD_PAGE = { default: 20, max: 100 } as const;

export interface Page<T> {
  items: T[];
  /** The cursor of the next page; absent on the last page. */
  next?: string;
}

/** What a page request says: its list, whose (organization, task), how many, after which cursor. */
interface PageRequest {
  list: ListName;
  scope: string;
  limit: number;
  cursor: string | undefined;
}

async function paged<R, T>(
  deps: Pick<Deps, 'secretBox'>,
  request: PageRequest,
  fetch: (rows: number, after: PagePosition | undefined) => Promise<Positioned<R>[]>,
  view: (row: R) => T,
): Promise<Page<T>> {
  const { list, scope, limit, cursor } = request;
  const after = cursor === undefined ? undefined : openCursor(deps.secretBox, list, scope, cursor);
  // One row more than the page tells whether a next page exists, without a count.
  const rows = await fetch(limit + 1, after);
  const shown = rows.slice(0, limit);
  const last = shown.at(-1);
  if (rows.length <= limit || !last) return { items: shown.map(view) };
  const id = (last as { id?: unknown }).id;
  const position = typeof id === 'string' ? { micros: last.sort_us, id } : { micros: last.sort_us };
  return { items: shown.map(view), next: sealCursor(deps.secretBox, list, scope, position) };
}

type PageDeps = Pick<Deps, 'db' | 'secretBox'>;

export const pageTasks = (deps: PageDeps, org: string, limit: number, cursor?: string): Promise<Page<Task>> =>
  paged(
    deps,
    { list: 'tasks', scope: org, limit, cursor },
    (n, at) => pageTaskRows(deps.db, org, n, at),
    taskView,
  );

export const pageSkills = (
  deps: PageDeps,
  org: string,
  limit: number,
  cursor?: string,
): Promise<Page<Skill>> =>
  paged(
    deps,
    { list: 'skills', scope: org, limit, cursor },
    (n, at) => pageSkillRows(deps.db, org, n, at),
    skillView,
  );

export const pageSources = (
  deps: PageDeps,
  org: string,
  limit: number,
  cursor?: string,
): Promise<Page<Source>> =>
  paged(
    deps,
    { list: 'sources', scope: org, limit, cursor },
    (n, at) => pageSourceRows(deps.db, org, n, at),
    sourceView,
  );

export const pageRuns = (deps: PageDeps, org: string, limit: number, cursor?: string): Promise<Page<Run>> =>
  paged(
    deps,
    { list: 'runs', scope: org, limit, cursor },
    (n, at) => pageRunRows(deps.db, org, n, at),
    runView,
  );

/** A task's runs, newest first; 404 when the task is not the organization's. */
export async function pageTaskRuns(
  deps: PageDeps,
  org: string,
  taskId: string,
  limit: number,
  cursor?: string,
): Promise<Page<Run>> {
  if (!(await taskExistsInOrganization(deps.db, org, taskId))) throw errors.notFound('Task');
  return paged(
    deps,
    { list: 'task-runs', scope: `${org}:${taskId}`, limit, cursor },
    (n, at) => pageTaskRunRows(deps.db, org, taskId, n, at),
    runView,
  );
}

/** A task's slot records, newest first; 404 when the task is not the organization's. */
export async function pageSlotRecords(
  deps: PageDeps,
  org: string,
  taskId: string,
  limit: number,
  cursor?: string,
): Promise<Page<SlotRecord>> {
  if (!(await taskExistsInOrganization(deps.db, org, taskId))) throw errors.notFound('Task');
  return paged(
    deps,
    { list: 'slots', scope: `${org}:${taskId}`, limit, cursor },
    (n, at) => pageSlotRows(deps.db, taskId, n, at),
    slotRecordView,
  );
}
