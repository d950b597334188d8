import type { Queryable } from '../db.ts';
import type { LimitOverrides, Plan } from './plan-types.ts';

export interface OrganizationRow {
  id: string;
  name: string;
  plan: Plan;
  limit_overrides: LimitOverrides;
  webhook_secret_sealed: string;
  billing_period_start: Date;
  payment_customer_id: string | null;
  payment_subscription_id: string | null;
  /** When a run was first refused for the run limit in a period (see migrations/0011). */
  run_limit_reached_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export async function insertOrganization(
  db: Queryable,
  row: { id: string; name: string; plan: Plan; webhookSecretSealed: string; now: Date },
): Promise<OrganizationRow> {
  const [org] = await db.query<OrganizationRow>(
    `INSERT INTO organizations (id, name, plan, webhook_secret_sealed, billing_period_start, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $5, $5) RETURNING *`,
    [row.id, row.name, row.plan, row.webhookSecretSealed, row.now],
  );
  if (!org) throw new Error('insert returned no row');
  return org;
}

export async function findOrganization(db: Queryable, id: string): Promise<OrganizationRow | undefined> {
  const [org] = await db.query<OrganizationRow>('SELECT * FROM organizations WHERE id = $1', [id]);
  return org;
}

export async function listOrganizations(db: Queryable): Promise<OrganizationRow[]> {
  return db.query<OrganizationRow>('SELECT * FROM organizations ORDER BY created_at DESC, id');
}

export async function countOrganizations(db: Queryable): Promise<number> {
  const [row] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM organizations');
  return row?.n ?? 0;
}

export async function updateOrganization(
  db: Queryable,
  id: string,
  patch: { name?: string; plan?: Plan; limitOverrides?: LimitOverrides; now: Date },
): Promise<OrganizationRow | undefined> {
  const [org] = await db.query<OrganizationRow>(
    `UPDATE organizations SET
       name = coalesce($2, name),
       plan = coalesce($3, plan),
       limit_overrides = coalesce($4::jsonb, limit_overrides),
       updated_at = $5
     WHERE id = $1 RETURNING *`,
    [
      id,
      patch.name ?? null,
      patch.plan ?? null,
      patch.limitOverrides ? JSON.stringify(patch.limitOverrides) : null,
      patch.now,
    ],
  );
  return org;
}
