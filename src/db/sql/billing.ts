import type { Queryable } from '../db.ts';
import type { OrganizationRow } from './organizations.ts';
import type { Plan } from './plan-types.ts';

/** Stores the Stripe customer of the organization unless it has one; returns the one it has. */
export async function setPaymentCustomer(
  db: Queryable,
  organizationId: string,
  customerId: string,
): Promise<string> {
  const [row] = await db.query<{ payment_customer_id: string }>(
    `UPDATE organizations SET payment_customer_id = coalesce(payment_customer_id, $2), updated_at = now()
      WHERE id = $1 RETURNING payment_customer_id`,
    [organizationId, customerId],
  );
  if (!row) throw new Error(`organization ${organizationId} not found`);
  return row.payment_customer_id;
}

export async function findOrganizationByCustomer(
  db: Queryable,
  customerId: string,
): Promise<OrganizationRow | undefined> {
  const [row] = await db.query<OrganizationRow>(
    'SELECT * FROM organizations WHERE payment_customer_id = $1',
    [customerId],
  );
  return row;
}

/** Remembers a webhook event; false when it was seen before (a redelivery by Stripe). */
export async function recordBillingEvent(
  db: Queryable,
  eventId: string,
  type: string,
  now: Date,
): Promise<boolean> {
  const rows = await db.query(
    `INSERT INTO billing_events (event_id, type, received_at) VALUES ($1, $2, $3)
     ON CONFLICT (event_id) DO NOTHING RETURNING event_id`,
    [eventId, type, now],
  );
  return rows.length > 0;
}

/**
 * Applies a subscription's state, unless a newer event already did (`eventAt` is the event's
 * `created`). An event about another subscription than the stored one may only start a plan,
 * never end it: cancelling an old subscription must not downgrade a newer one.
 */
export async function applySubscription(
  db: Queryable,
  organizationId: string,
  s: { plan: Plan; subscriptionId: string; status: string; eventAt: Date; customerId: string },
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE organizations SET plan = $2, payment_subscription_id = $3, subscription_status = $4,
            subscription_event_at = $5, payment_customer_id = coalesce(payment_customer_id, $6), updated_at = now()
      WHERE id = $1
        AND (subscription_event_at IS NULL OR subscription_event_at <= $5)
        AND ($2 = 'paid' OR payment_subscription_id IS NULL OR payment_subscription_id = $3)
      RETURNING id`,
    [organizationId, s.plan, s.subscriptionId, s.status, s.eventAt, s.customerId],
  );
  return rows.length > 0;
}

/** A paid invoice starts a new billing period; an older one (arriving late) changes nothing. */
export async function startBillingPeriod(
  db: Queryable,
  organizationId: string,
  start: Date,
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE organizations SET billing_period_start = $2, updated_at = now()
      WHERE id = $1 AND billing_period_start < $2 RETURNING id`,
    [organizationId, start],
  );
  return rows.length > 0;
}

export interface MeterReportRow {
  id: string;
  organization_id: string;
  value_cents: number;
  created_at: Date;
  attempts: number;
  payment_customer_id: string | null;
}

/**
 * Queues the usage of the organization's current period that is beyond its credits and not yet
 * reported: one row with the difference. Locks the organization row so that two runs ending at
 * once do not both queue the same cents.
 */
export async function queueMeterReport(
  tx: Queryable,
  o: { organizationId: string; periodStart: Date; overageCents: number; now: Date; id: string },
): Promise<number> {
  await tx.query('SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE', [o.organizationId]);
  const [row] = await tx.query<{ reported: number }>(
    `SELECT coalesce(sum(value_cents), 0)::int AS reported FROM meter_reports
      WHERE organization_id = $1 AND period_start = $2`,
    [o.organizationId, o.periodStart],
  );
  const delta = o.overageCents - (row?.reported ?? 0);
  if (delta <= 0) return 0;
  await tx.query(
    `INSERT INTO meter_reports (id, organization_id, period_start, value_cents, created_at, next_attempt_at)
     VALUES ($1, $2, $3, $4, $5, $5)`,
    [o.id, o.organizationId, o.periodStart, delta, o.now],
  );
  return delta;
}

/** Reports not yet sent whose next attempt is due, oldest first. */
export function dueMeterReports(db: Queryable, now: Date, limit: number): Promise<MeterReportRow[]> {
  return db.query<MeterReportRow>(
    `SELECT m.id, m.organization_id, m.value_cents, m.created_at, m.attempts, o.payment_customer_id
       FROM meter_reports m JOIN organizations o ON o.id = m.organization_id
      WHERE m.sent_at IS NULL AND m.next_attempt_at <= $1
      ORDER BY m.created_at LIMIT $2`,
    [now, limit],
  );
}

export async function markMeterReport(
  db: Queryable,
  id: string,
  outcome: { sentAt: Date } | { error: string; nextAttemptAt: Date },
): Promise<void> {
  if ('sentAt' in outcome) {
    await db.query('UPDATE meter_reports SET sent_at = $2, attempts = attempts + 1 WHERE id = $1', [
      id,
      outcome.sentAt,
    ]);
  } else {
    await db.query(
      'UPDATE meter_reports SET attempts = attempts + 1, last_error = $2, next_attempt_at = $3 WHERE id = $1',
      [id, outcome.error, outcome.nextAttemptAt],
    );
  }
}
