import type { Config } from '../config.ts';
import type { Db } from './db.ts';

/** Opens the configured database; only that backend's driver is loaded. */
export async function openDb(
  config: Pick<Config, 'databaseUrl' | 'dataDir' | 'embeddedFsync' | 'dbPoolSize'>,
  onError: (err: Error) => void,
): Promise<Db> {
  if (config.databaseUrl) {
    const { openPostgres } = await import('./postgres.ts');
    return openPostgres(config.databaseUrl, config.dbPoolSize, onError);
  }
  const { openPglite } = await import('./pglite.ts');
  return openPglite(config.dataDir, { durable: config.embeddedFsync });
}
