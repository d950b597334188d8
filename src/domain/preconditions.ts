import type { Db, Queryable } from '../db/db.ts';
import { canonicalJson, sha256Hex } from '../lib/canonical-json.ts';
import { AppError } from '../lib/errors.ts';
import { memoOnFrozen } from '../lib/frozen.ts';

/**
 * A resource's strong entity tag: a hash of its representation as canonical JSON, so it changes
 * whenever the representation does (and only then). The GET answer's tag and the one a write
 * compares under its row lock are computed from the same representation. A frozen
 * representation (a reused row's view, lib/frozen.ts) is tagged once.
 */
export const entityTag: (representation: unknown) => string = memoOnFrozen(
  (representation) => `"${sha256Hex(canonicalJson(representation)).slice(0, 32)}"`,
);

function listedTags(header: string): string[] {
  return header
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
}

/**
 * If-Match of a PATCH or DELETE, checked against the resource as it is under the write's row
 * lock: no header, `*`, or a listed tag equal to the current one (strong comparison: a weak
 * `W/` tag never matches) lets the write go on; anything else is a 412 and nothing changes.
 */
export function assertIfMatch(ifMatch: string | undefined, current: unknown): void {
  if (ifMatch === undefined) return;
  const tags = listedTags(ifMatch);
  if (tags.includes('*') || tags.includes(entityTag(current))) return;
  throw new AppError(
    'precondition_failed',
    'The resource has changed since the ETag given in If-Match; get it again and retry',
  );
}

/** If-None-Match of a GET: whether the client's copy is current (weak comparison, `*` too). */
export function noneMatchHits(ifNoneMatch: string, tag: string): boolean {
  return listedTags(ifNoneMatch).some((t) => t === '*' || t.replace(/^W\//, '') === tag);
}

/**
 * Deletes a resource in one transaction: with If-Match, only if the resource read under its row
 * lock (`locked`, undefined when it is gone) still has that tag (412 otherwise). Returns what
 * `remove` returns, or undefined when there was nothing to delete.
 */
export async function deleteIfMatch<Row, Removed>(
  db: Db,
  ifMatch: string | undefined,
  o: {
    locked: (tx: Queryable) => Promise<Row | undefined>;
    view: (row: Row) => unknown;
    remove: (tx: Queryable) => Promise<Removed>;
  },
): Promise<Removed | undefined> {
  return db.transaction(async (tx) => {
    if (ifMatch !== undefined) {
      const current = await o.locked(tx);
      if (current === undefined) return undefined;
      assertIfMatch(ifMatch, o.view(current));
    }
    return o.remove(tx);
  });
}
