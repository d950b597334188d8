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
  /** Claiming runs (db/sql/run-queue.ts): makes the per-organization limit exact. */
  runClaim: 7_420_133_001,
} as const;

export type LockKey = (typeof LOCK_KEYS)[keyof typeof LOCK_KEYS];

/** Waits for the transaction-level advisory lock `key`; the transaction's end releases it. */
export async function holdTransactionLock(tx: Queryable, key: LockKey): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock($1)', [key]);
}
