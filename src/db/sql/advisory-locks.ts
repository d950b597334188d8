import type { Queryable } from '../db.ts';

/**
 * Every PostgreSQL advisory-lock key the service takes, in one place, so that no two uses can
 * pick the same number by accident. The numbers are arbitrary but fixed: every process that
 * works on one database must take the same key for the same purpose.
 */
export const LOCK_KEYS = {
  /** Applying migrations (db/migrate.ts): processes starting at once wait for each other. */
  migrations: 727_001,
  /** Creating the demo organization on the first start (domain/organizations.ts). */
  demoOrganization: 727_002,
} as const;

/**
 * Classes of the two-key advisory locks (class, key): PostgreSQL keeps them in a space apart
 * from the one-key locks above, so a class number cannot meet a key there.
 */
export const LOCK_CLASSES = {
  /**
   * Claiming runs for one organization (db/sql/run-claim.ts), the key a hash of its id: makes
   * the per-organization limit exact without serialising claims for other organizations.
   */
  runClaimOrganization: 7_420_133,
} as const;

export type LockKey = (typeof LOCK_KEYS)[keyof typeof LOCK_KEYS];

/** Waits for the transaction-level advisory lock `key`; the transaction's end releases it. */
export async function holdTransactionLock(tx: Queryable, key: LockKey): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1)', [key]);
}
