import type { AuthConfig, SourceConfig, SourceType, Tool } from '../../schemas/source.ts';
import type { Queryable } from '../db.ts';

export interface SourceRow {
  id: string;
  organization_id: string;
  name: string;
  slug: string;
  type: SourceType;
  /** The config with every env value replaced by the mask: never a secret. */
  config: SourceConfig;
  auth_type: string | null;
  /** authConfig with every credential replaced by the mask: never a secret. */
  auth_config: AuthConfig | null;
  /** Sealed `{ env, credentials }` (see domain/sources.ts); null when there is none. */
  secrets_sealed: string | null;
  description: string | null;
  icon_url: string | null;
  is_active: boolean;
  last_connected_at: Date | null;
  tools: Tool[] | null;
  connector_toolkit: string | null;
  connector_connected: boolean | null;
  created_at: Date;
  updated_at: Date;
}

/** The fields a create or an update writes. */
export interface SourceFields {
  name: string;
  config: SourceConfig;
  auth_type: string | null;
  auth_config: AuthConfig | null;
  secrets_sealed: string | null;
  description: string | null;
  is_active: boolean;
}

const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

export async function insertSource(
  db: Queryable,
  row: SourceFields & {
    id: string;
    organization_id: string;
    slug: string;
    type: SourceType;
    icon_url: string | null;
    now: Date;
  },
): Promise<SourceRow> {
  const [source] = await db.query<SourceRow>(
    `INSERT INTO sources (id, organization_id, name, slug, type, config, auth_type, auth_config, secrets_sealed,
                          description, icon_url, is_active, tools, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::jsonb, $9, $10, $11, $12, '[]'::jsonb, $13, $13) RETURNING *`,
    [
      row.id,
      row.organization_id,
      row.name,
      row.slug,
      row.type,
      json(row.config),
      row.auth_type,
      json(row.auth_config),
      row.secrets_sealed,
      row.description,
      row.icon_url,
      row.is_active,
      row.now,
    ],
  );
  if (!source) throw new Error('insert returned no row');
  return source;
}

/** Slugs of the organization's sources that are `base` or start with `base-`. */
export async function sourceSlugsLike(
  db: Queryable,
  organizationId: string,
  base: string,
): Promise<string[]> {
  const rows = await db.query<{ slug: string }>(
    `SELECT slug FROM sources WHERE organization_id = $1 AND (slug = $2 OR starts_with(slug, $2 || '-'))`,
    [organizationId, base],
  );
  return rows.map((r) => r.slug);
}

export async function findSource(
  db: Queryable,
  organizationId: string,
  id: string,
  options: { forUpdate?: boolean } = {},
): Promise<SourceRow | undefined> {
  const [source] = await db.query<SourceRow>(
    options.forUpdate
      ? 'SELECT * FROM sources WHERE organization_id = $1 AND id = $2 FOR UPDATE'
      : 'SELECT * FROM sources WHERE organization_id = $1 AND id = $2',
    [organizationId, id],
  );
  return source;
}

export async function sourceCount(db: Queryable, organizationId: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM sources WHERE organization_id = $1',
    [organizationId],
  );
  return row?.n ?? 0;
}

export async function listSources(db: Queryable, organizationId: string): Promise<SourceRow[]> {
  return db.query<SourceRow>(
    'SELECT * FROM sources WHERE organization_id = $1 ORDER BY created_at DESC, id DESC',
    [organizationId],
  );
}

export async function updateSource(
  db: Queryable,
  organizationId: string,
  id: string,
  fields: SourceFields & { now: Date },
): Promise<SourceRow | undefined> {
  const [source] = await db.query<SourceRow>(
    `UPDATE sources SET
       name = $3,
       config = $4::jsonb,
       auth_type = $5,
       auth_config = $6::jsonb,
       secrets_sealed = $7,
       description = $8,
       is_active = $9,
       updated_at = $10
     WHERE organization_id = $1 AND id = $2 RETURNING *`,
    [
      organizationId,
      id,
      fields.name,
      json(fields.config),
      fields.auth_type,
      json(fields.auth_config),
      fields.secrets_sealed,
      fields.description,
      fields.is_active,
      fields.now,
    ],
  );
  return source;
}

const LOCK_SOURCES_TASKS = `SELECT t.id FROM tasks t
  WHERE t.organization_id = $1 AND t.id IN (SELECT x.task_id FROM task_sources x WHERE x.source_id = $2)
  ORDER BY t.id FOR NO KEY UPDATE`;

/**
 * Deletes the source; its links to tasks go with it (ON DELETE CASCADE), and the link triggers
 * then rewrite those tasks' rows (migration 0019). Run in a transaction: the tasks are locked
 * first, in id order, as a task's own edits lock it before its links, so that deleting a
 * source while one of its tasks is edited waits instead of deadlocking.
 */
export async function deleteSource(db: Queryable, organizationId: string, id: string): Promise<boolean> {
  await db.query(LOCK_SOURCES_TASKS, [organizationId, id]);
  const rows = await db.query('DELETE FROM sources WHERE organization_id = $1 AND id = $2 RETURNING id', [
    organizationId,
    id,
  ]);
  return rows.length > 0;
}

/** What a connection test found: tools and connected time only when it succeeded. */
export async function recordSourceTest(
  db: Queryable,
  organizationId: string,
  id: string,
  outcome: { ok: true; tools: Tool[]; at: Date } | { ok: false; at: Date },
): Promise<void> {
  if (outcome.ok) {
    await db.query(
      `UPDATE sources SET tools = $3::jsonb, is_active = true, last_connected_at = $4, updated_at = $4
       WHERE organization_id = $1 AND id = $2`,
      [organizationId, id, JSON.stringify(outcome.tools), outcome.at],
    );
  } else {
    await db.query(
      'UPDATE sources SET is_active = false, updated_at = $3 WHERE organization_id = $1 AND id = $2',
      [organizationId, id, outcome.at],
    );
  }
}
