import { randomBytes, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

export const newId = (): string => randomUUID();

/**
 * The name a background part holds its leases under (db/sql/leased-jobs.ts): host and process,
 * which say in logs and rows whose lease it is, and a random part, so that two parts of one
 * process never share a name.
 */
export const leaseOwnerId = (): string => `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string): boolean => UUID_RE.test(s);
