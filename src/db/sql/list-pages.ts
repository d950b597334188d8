// Keyset pages of the API's lists, each in the order its full list has (newest first, the id
// breaking ties). A page starts strictly after the position a cursor names, so rows inserted or
// deleted between two pages never make a row that existed throughout appear twice or not at all.
import type { Queryable } from '../db.ts';
import type { RunRow } from './runs.ts';
import type { SkillRow } from './skills.ts';
import type { SlotRecordRow } from './slot-records.ts';
import type { SourceRow } from './sources.ts';
import { SELECT_WITH_LINKS, type TaskWithLinks } from './tasks.ts';

/**
 * A position in a list: the sort timestamp in whole microseconds since the epoch (the
 * database's precision, which a JavaScript Date would round to milliseconds), and the row's id
 * (absent for slot records, whose timestamp is unique within their task).
 */
export interface PagePosition {
  micros: string;
  id?: string;
}

/** A row with its position, `sort_us` (what a cursor after it holds). */
export type Positioned<T> = T & { sort_us: string };

const micros = (column: string) => `(extract(epoch FROM ${column}) * 1000000)::int8::text AS sort_us`;
const instant = (param: string) => `(timestamptz 'epoch' + ${param}::int8 * interval '1 microsecond')`;

/**
 * A list's two statement texts, the first page's (`$1` the organization, `$2` the page size) and
 * the next pages' (`$2`, `$3` the position, `$4` the page size), built once (the Db seam names
 * prepared statements by their text), each able to walk its index in order and stop.
 */
function texts(select: string, ts: string, id: string) {
  const order = `ORDER BY ${ts} DESC, ${id} DESC`;
  return {
    first: `${select} ${order} LIMIT $2`,
    after: `${select} AND (${ts}, ${id}) < (${instant('$2')}, $3::uuid) ${order} LIMIT $4`,
  };
}

/**
 * The tasks' page reads its rows through svc_task_page (migration 0024): planned once per
 * connection whatever the organizations' sizes, where the plain statement was planned anew at
 * each request once the table had been analysed. The same order and positions as `texts`.
 */
const taskPage = (from: string) =>
  `${SELECT_WITH_LINKS.replace('SELECT t.*,', `SELECT t.*, ${micros('t.created_at')},`).replace(
    'FROM tasks t',
    `FROM ${from} t`,
  )} ORDER BY t.created_at DESC, t.id DESC`;
const TASKS = {
  first: taskPage('svc_task_page($1, NULL, NULL, $2)'),
  after: taskPage(`svc_task_page($1, ${instant('$2')}, $3::uuid, $4)`),
};
const byCreation = (table: string) =>
  texts(`SELECT *, ${micros('created_at')} FROM ${table} WHERE organization_id = $1`, 'created_at', 'id');
const SKILLS = byCreation('skills');
const SOURCES = byCreation('sources');
/** Runs' pages, of an organization or of one task, through svc_run_page (migration 0025), as tasks'. */
const runPage = (args: string) =>
  `SELECT r.*, ${micros('r.created_at')} FROM svc_run_page(${args}) r ORDER BY r.created_at DESC, r.id DESC`;
const RUNS = {
  first: runPage('$1, NULL, NULL, NULL, $2'),
  after: runPage(`$1, NULL, ${instant('$2')}, $3::uuid, $4`),
};
const TASK_RUNS_FIRST = runPage('$1, $2, NULL, NULL, $3');
const TASK_RUNS_AFTER = runPage(`$1, $2, ${instant('$3')}, $4::uuid, $5`);

const SLOTS_FIRST = `SELECT slot_at, outcome, run_id, slots, reason, ${micros('slot_at')}
  FROM task_slots WHERE task_id = $1 ORDER BY slot_at DESC LIMIT $2`;
const SLOTS_AFTER = `SELECT slot_at, outcome, run_id, slots, reason, ${micros('slot_at')}
  FROM task_slots WHERE task_id = $1 AND slot_at < ${instant('$2')} ORDER BY slot_at DESC LIMIT $3`;

/** Up to `rows` of the list after `after` (from the start without it). */
function page<T>(
  db: Queryable,
  first: string,
  afterText: string,
  scope: unknown[],
  rows: number,
  after: PagePosition | undefined,
): Promise<Positioned<T>[]> {
  return after
    ? db.query<Positioned<T>>(afterText, [...scope, after.micros, after.id, rows])
    : db.query<Positioned<T>>(first, [...scope, rows]);
}

export const pageTaskRows = (db: Queryable, organizationId: string, rows: number, after?: PagePosition) =>
  page<Readonly<TaskWithLinks>>(db, TASKS.first, TASKS.after, [organizationId], rows, after);

export const pageSkillRows = (db: Queryable, organizationId: string, rows: number, after?: PagePosition) =>
  page<SkillRow>(db, SKILLS.first, SKILLS.after, [organizationId], rows, after);

export const pageSourceRows = (db: Queryable, organizationId: string, rows: number, after?: PagePosition) =>
  page<SourceRow>(db, SOURCES.first, SOURCES.after, [organizationId], rows, after);

export const pageRunRows = (db: Queryable, organizationId: string, rows: number, after?: PagePosition) =>
  page<RunRow>(db, RUNS.first, RUNS.after, [organizationId], rows, after);

export const pageTaskRunRows = (
  db: Queryable,
  organizationId: string,
  taskId: string,
  rows: number,
  after?: PagePosition,
) => page<RunRow>(db, TASK_RUNS_FIRST, TASK_RUNS_AFTER, [organizationId, taskId], rows, after);

/** Slot records of a task the caller has already found in its organization. */
export function pageSlotRows(
  db: Queryable,
  taskId: string,
  rows: number,
  after?: PagePosition,
): Promise<Positioned<SlotRecordRow>[]> {
  return after
    ? db.query<Positioned<SlotRecordRow>>(SLOTS_AFTER, [taskId, after.micros, rows])
    : db.query<Positioned<SlotRecordRow>>(SLOTS_FIRST, [taskId, rows]);
}
