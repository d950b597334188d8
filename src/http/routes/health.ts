import type { Deps } from '../../domain/deps.ts';
import { errors } from '../../lib/errors.ts';
import type { App } from '../types.ts';
import type { HealthSchemas } from './health-schemas.ts';

const READY_TIMEOUT_MS = 2000;

/**
 * /healthz, /readyz and /metrics, served by every process. `schemas` (health-schemas.ts) are
 * given by the api role's surface, for its OpenAPI document; other processes serve the routes
 * without them.
 */
export function healthRoutes(app: App, deps: Deps, schemas?: HealthSchemas): void {
  app.get('/healthz', { ...(schemas && { schema: schemas.healthz }) }, async () => ({
    status: 'ok' as const,
  }));

  app.get('/readyz', { ...(schemas && { schema: schemas.readyz }) }, async () => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), READY_TIMEOUT_MS);
    });
    try {
      await Promise.race([deps.db.query('SELECT 1'), timeout]);
    } catch {
      throw errors.unavailable('The database is not reachable');
    } finally {
      clearTimeout(timer);
    }
    return { status: 'ready' as const };
  });

  app.get('/metrics', { ...(schemas && { schema: schemas.metrics }) }, async (_request, reply) => {
    reply.type(deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
}
