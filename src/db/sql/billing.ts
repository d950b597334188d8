import type { Queryable } from '../db.ts';
import { type ClaimableTable, claimLeased, recoverExpiredLeased, settleLeased } from './leased-jobs.ts';
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

/**
 * The meter report outbox as a leased-job table: a report is claimable while unsent, due and
 * unleased, and only for an organization with a Stripe customer (it has nowhere to go before).
 */
const METER_REPORTS: ClaimableTable = {
  table: 'meter_reports',
  claimable: `sent_at IS NULL AND lease_owner IS NULL AND next_attempt_at <= $now
    AND EXISTS (SELECT 1 FROM organizations o
                 WHERE o.id = meter_reports.organization_id AND o.payment_customer_id IS NOT NULL)`,
  order: 'created_at, id',
  held: 'sent_at IS NULL AND lease_owner IS NOT NULL',
  // A report given back keeps its due time: an expired lease means it may be due already.
  onReturn: '',
};

/** Takes the oldest due report under a lease for `owner`, with its organization's customer. */
export async function claimMeterReport(
  tx: Queryable,
  o: { owner: string; now: Date; leaseMs: number },
): Promise<MeterReportRow | undefined> {
  const [report] = await claimLeased<Omit<MeterReportRow, 'payment_customer_id'>>(tx, METER_REPORTS, {
    ...o,
    limit: 1,
  });
  if (!report) return undefined;
  const [org] = await tx.query<{ payment_customer_id: string | null }>(
    'SELECT payment_customer_id FROM organizations WHERE id = $1',
    [report.organization_id],
  );
  return { ...report, payment_customer_id: org?.payment_customer_id ?? null };
}

/** Reports whose reporter stopped before settling them are claimable again; returns how many. */
export async function recoverExpiredMeterReports(db: Queryable, now: Date): Promise<number> {
  return (await recoverExpiredLeased(db, METER_REPORTS, now)).length;
}

/**
 * Records a send (sent, or failed with its next attempt), only while `owner` holds the report.
 * Returns whether it did; false means the lease expired and another reporter may have it.
 */
export function settleMeterReport(
  db: Queryable,
  id: string,
  owner: string,
  outcome: { sentAt: Date } | { error: string; nextAttemptAt: Date },
): Promise<boolean> {
  return 'sentAt' in outcome
    ? settleLeased(db, METER_REPORTS, {
        id,
        owner,
        assignments: 'sent_at = $3, attempts = attempts + 1',
        values: [outcome.sentAt],
      })
    : settleLeased(db, METER_REPORTS, {
        id,
        owner,
        assignments: 'attempts = attempts + 1, last_error = $3, next_attempt_at = $4',
        values: [outcome.error, outcome.nextAttemptAt],
      });
}
