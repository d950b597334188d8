import {
  type DestinationRow,
  deleteDestination,
  findTask,
  insertDestination,
  lockTask,
  updateDestination,
} from '../db/sql/tasks.ts';
import { emailAddressProblem } from '../lib/email-address.ts';
import { errors } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import type { Destination, DestinationInput, DestinationPatch } from '../schemas/task.ts';
import { E164_PATTERN } from '../schemas/task.ts';
import type { Deps } from './deps.ts';
import { checkTaskTotals } from './org-caps.ts';

const E164_RE = new RegExp(E164_PATTERN);

/**
 * What is wrong with a destination value for its type, or undefined when it is fine. Whether a
 * webhook address may be dialled (private addresses, DNS) is decided at delivery time.
 */
export function checkDestination(type: 'email' | 'sms' | 'webhook', value: string): string | undefined {
  switch (type) {
    case 'email':
      return emailAddressProblem(value);
    case 'sms':
      return E164_RE.test(value) ? undefined : 'must be a phone number in E.164 form, e.g. +14155550123';
    case 'webhook': {
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        return 'must be an http or https URL';
      }
      if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an http or https URL';
      if (url.username || url.password) return 'must not carry credentials in the URL';
      return undefined;
    }
  }
}

/** A task holds at most this many destinations. */
export const MAX_DESTINATIONS = 20;

function destinationView(d: DestinationRow): Destination {
  return { id: d.id, type: d.type, value: d.value, ...(d.label !== null && { label: d.label }) };
}

function assertValid(type: DestinationInput['type'], value: string): void {
  const problem = checkDestination(type, value);
  if (problem) throw errors.validation(`/body/value ${problem}`, [{ path: '/body/value', message: problem }]);
}

export async function listDestinations(deps: Pick<Deps, 'db'>, organizationId: string, taskId: string) {
  const task = await findTask(deps.db, organizationId, taskId);
  if (!task) throw errors.notFound('Task');
  return task.destinations.map(destinationView);
}

export async function addDestination(
  deps: Pick<Deps, 'db' | 'clock' | 'config'>,
  organizationId: string,
  taskId: string,
  input: DestinationInput,
): Promise<Destination> {
  assertValid(input.type, input.value);
  return deps.db.transaction(async (tx) => {
    const task = (await lockTask(tx, organizationId, taskId)) && (await findTask(tx, organizationId, taskId));
    if (!task) throw errors.notFound('Task');
    if (task.destinations.length >= MAX_DESTINATIONS) {
      throw errors.conflict(`A task holds at most ${MAX_DESTINATIONS} destinations`);
    }
    await checkTaskTotals(tx, organizationId, deps.config.orgCaps, { promptBytes: 0, destinations: 1 });
    const row = await insertDestination(
      tx,
      taskId,
      { id: newId(), type: input.type, value: input.value, label: input.label ?? null },
      deps.clock.now(),
    );
    return destinationView(row);
  });
}

export async function changeDestination(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  taskId: string,
  destinationId: string,
  patch: DestinationPatch,
): Promise<Destination> {
  return deps.db.transaction(async (tx) => {
    const task = (await lockTask(tx, organizationId, taskId)) && (await findTask(tx, organizationId, taskId));
    const current = task ? task.destinations.find((d) => d.id === destinationId.toLowerCase()) : undefined;
    if (!current) throw errors.notFound('Destination');
    const next = {
      type: patch.type ?? current.type,
      value: patch.value ?? current.value,
      label: patch.label !== undefined ? patch.label : current.label,
    };
    assertValid(next.type, next.value);
    const row = await updateDestination(tx, taskId, destinationId, next);
    if (!row) throw errors.notFound('Destination');
    return destinationView(row);
  });
}

export async function removeDestination(
  deps: Pick<Deps, 'db'>,
  organizationId: string,
  taskId: string,
  destinationId: string,
): Promise<void> {
  const task = await findTask(deps.db, organizationId, taskId);
  if (!task || !(await deleteDestination(deps.db, taskId, destinationId)))
    throw errors.notFound('Destination');
}
