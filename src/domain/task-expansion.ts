import { listSkills } from '../db/sql/skills.ts';
import { listSources } from '../db/sql/sources.ts';
import type { Task } from '../schemas/task.ts';
import type { Deps } from './deps.ts';
import { skillView } from './skills.ts';
import { sourceView } from './sources.ts';

/**
 * `?expand=skills,sources`: attaches the full Skill and Source objects (secrets masked, as
 * everywhere) in the task's own order. One query per expanded kind, whatever the number of tasks.
 */
export async function expandTasks(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  tasks: Task[],
  expand: string | undefined,
): Promise<Task[]> {
  if (!expand || tasks.length === 0) return tasks;
  const want = new Set(expand.split(','));
  const skills = want.has('skills')
    ? new Map((await listSkills(deps.db, organizationId)).map((r) => [r.id, skillView(r)]))
    : undefined;
  const sources = want.has('sources')
    ? new Map((await listSources(deps.db, organizationId)).map((r) => [r.id, sourceView(r)]))
    : undefined;
  const pick = <T>(ids: string[] | undefined, from: Map<string, T>) =>
    (ids ?? []).flatMap((id) => {
      const v = from.get(id);
      return v ? [v] : [];
    });
  return tasks.map((t) => ({
    ...t,
    ...(skills && { skills: pick(t.skillIds, skills) }),
    ...(sources && { sources: pick(t.sourceIds, sources) }),
  }));
}
