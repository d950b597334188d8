// The opaque cursors of the API's lists. A cursor is a list position sealed with the service's
// secret key (AES-256-GCM, lib/secret-box.ts): a client cannot read or forge one, and the
// associated data binds it to its list, its organization and (for a task's lists) its task, so a
// cursor of another list, task or organization fails to open exactly like a damaged one.
import type { PagePosition } from '../db/sql/list-pages.ts';
import { errors } from '../lib/errors.ts';
import type { SecretBox } from '../lib/secret-box.ts';

/** The paginated lists; each has its own cursors. */
export type ListName = 'tasks' | 'skills' | 'sources' | 'runs' | 'task-runs' | 'slots';

const MICROS = /^[0-9]{1,17}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const associatedData = (list: ListName, scope: string) => `cursor:${list}:${scope}`;

export function sealCursor(box: SecretBox, list: ListName, scope: string, position: PagePosition): string {
  return box.encrypt(JSON.stringify({ t: position.micros, i: position.id }), associatedData(list, scope));
}

const invalidCursor = () =>
  errors.validation('The cursor is not one this list gave out', [
    { path: '/query/cursor', message: 'is not a cursor of this list; start again without it' },
  ]);

/** The position a cursor names; a 400 at /query/cursor for anything this list did not give out. */
export function openCursor(box: SecretBox, list: ListName, scope: string, cursor: string): PagePosition {
  let parsed: unknown;
  try {
    parsed = JSON.parse(box.decrypt(cursor, associatedData(list, scope)));
  } catch {
    throw invalidCursor();
  }
  const { t, i } = (parsed ?? {}) as { t?: unknown; i?: unknown };
  // Sealed by this service, so well formed; checked anyway, as the statement takes them as typed.
  if (typeof t !== 'string' || !MICROS.test(t)) throw invalidCursor();
  if (i === undefined) return { micros: t };
  if (typeof i !== 'string' || !UUID.test(i)) throw invalidCursor();
  return { micros: t, id: i };
}
