import type { Config } from '../config.ts';
import type { Db } from './db.ts';
import { openPglite } from './pglite.ts';
import { openPostgres } from './postgres.ts';

export function openDb(
  config: Pick<Config, 'databaseUrl' | 'dataDir' | 'embeddedFsync' | 'dbPoolSize'>,
  onError: (err: Error) => void,
): Promise<Db> {
  return config.databaseUrl
    ? openPostgres(config.databaseUrl, config.dbPoolSize, onError)
    : openPglite(config.dataDir, { durable: config.embeddedFsync });
}
