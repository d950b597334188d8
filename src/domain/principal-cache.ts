import type { Db } from '../db/db.ts';
import { findKeyByHash, type KeyLookupRow } from '../db/sql/api-keys.ts';
import { notify } from '../db/sql/notify.ts';
import { setBounded } from '../lib/bounded-map.ts';

/**
 * How long a looked-up key is trusted without asking the database again. Changes made through
 * the service (revocation, plan and limit changes) reach every process at once by NOTIFY; this
 * bound only covers a notification lost while a process's listening connection was down and
 * changes made behind the service's back.
 */
const TTL_MS = 5_000;
/** Keys remembered per process; the least recently looked-up are dropped first. */
const MAX_KEYS = 10_000;
/** The channel on which a change to keys or organizations is announced. */
export const PRINCIPALS_CHANNEL = 'svc_principals';

interface Entry {
  row: KeyLookupRow | null;
  loadedAt: number;
}

/**
 * API keys by hash with their organization's plan and limits, kept in memory so that an
 * authenticated request costs no database round trip. Unknown hashes are remembered too:
 * key values are random, so an unknown hash never becomes a key later.
 */
export class PrincipalCache {
  readonly #db: Db;
  readonly #entries = new Map<string, Entry>();
  readonly #loading = new Map<string, Promise<KeyLookupRow | null>>();
  /** Bumped by every invalidation, so a lookup that started before it is not remembered. */
  #generation = 0;

  constructor(db: Db) {
    this.#db = db;
  }

  /** Forgets everything whenever another process announces a change (or the listener reconnects). */
  listen(): Promise<() => Promise<void>> {
    return this.#db.listen(PRINCIPALS_CHANNEL, () => this.clear());
  }

  /** The key as remembered, if it is remembered and still trusted; undefined otherwise (then lookup()). */
  peek(keyHash: string): KeyLookupRow | null | undefined {
    const entry = this.#entries.get(keyHash);
    return entry && performance.now() - entry.loadedAt < TTL_MS ? entry.row : undefined;
  }

  async lookup(keyHash: string): Promise<KeyLookupRow | null> {
    const known = this.peek(keyHash);
    if (known !== undefined) return known;
    const pending = this.#loading.get(keyHash);
    if (pending) return pending;
    const generation = this.#generation;
    const load = findKeyByHash(this.#db, keyHash)
      .then((row) => {
        if (generation === this.#generation)
          setBounded(this.#entries, keyHash, { row, loadedAt: performance.now() }, MAX_KEYS);
        return row;
      })
      .finally(() => this.#loading.delete(keyHash));
    this.#loading.set(keyHash, load);
    return load;
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
    this.#loading.clear();
  }

  /**
   * After a key was revoked or an organization's plan or limits changed: this process forgets
   * at once, the others when the notification reaches them.
   */
  async changed(): Promise<void> {
    this.clear();
    await notify(this.#db, PRINCIPALS_CHANNEL);
  }
}
