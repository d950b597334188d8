// Metered usage: on the paid plan, run costs beyond the plan's credits are reported to Stripe
// as meter events. Reports go through an outbox (meter_reports): a row is written first, in
// the run's organization lock, then sent with its id as the event's `identifier`. Stripe
// counts an identifier once, so a report sent twice (a crash after sending, two workers) is
// billed once, and none is lost to a crash before sending.
import Stripe from 'stripe';
import { dueMeterReports, markMeterReport, queueMeterReport } from '../db/sql/billing.ts';
import { findOrganization } from '../db/sql/organizations.ts';
import { currentTime, notify } from '../db/sql/time.ts';
import { periodUsage } from '../db/sql/usage.ts';
import { currentPeriodStart } from '../domain/billing-period.ts';
import type { Deps } from '../domain/deps.ts';
import { effectiveLimits } from '../domain/plans.ts';
import { CoalescedTask } from '../lib/coalesced-task.ts';
import { newId } from '../lib/ids.ts';

/** Reports sent per pass; the rest wait for the next one. */
const BATCH = 50;
/** Between looks when nothing wakes the reporter (a failed report's retry time, at most). */
const POLL_MS = 60_000;
/** A failed report waits 1 min, 2, 4, ... up to an hour. */
const retryDelayMs = (attempts: number) => Math.min(3_600_000, 60_000 * 2 ** Math.min(attempts, 6));

/**
 * After a run of the organization ended: queues the period's new usage beyond its credits, if
 * it is on the paid plan with a Stripe customer. Returns the cents queued.
 */
export async function queueUsageReport(
  deps: Pick<Deps, 'db' | 'clock'>,
  organizationId: string,
): Promise<number> {
  const { db, clock } = deps;
  return db.transaction(async (tx) => {
    const org = await findOrganization(tx, organizationId);
    if (org?.plan !== 'paid' || !org.payment_customer_id) return 0;
    const now = await currentTime(tx, clock);
    const periodStart = currentPeriodStart(org.billing_period_start, now);
    const usage = await periodUsage(tx, organizationId, periodStart);
    const { usageCreditsCents } = effectiveLimits(org.plan, org.limit_overrides);
    // Whole cents: Stripe meter values are integers here, and the remainder is reported with
    // the next run's cost.
    const overageCents = Math.floor(Math.max(0, Number(usage.cost_cents) - usageCreditsCents));
    const queued = await queueMeterReport(tx, {
      organizationId,
      periodStart,
      overageCents,
      now,
      id: newId(),
    });
    if (queued > 0) await notify(tx, 'svc_billing');
    return queued;
  });
}

/** Sends queued reports to Stripe (worker role, when Stripe is configured). */
export class UsageReporter {
  readonly #deps: Deps;
  readonly #passes = new CoalescedTask(() => this.#pass());
  #timer: NodeJS.Timeout | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  #stopped = false;

  constructor(deps: Deps) {
    this.#deps = deps;
  }

  async start(): Promise<void> {
    this.#unlisten = await this.#deps.db.listen('svc_billing', () => this.wake());
    this.wake();
  }

  wake(): void {
    this.#passes.request();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#unlisten?.();
    await this.#passes.stop();
  }

  /** Sends every due report once; returns how many were sent. */
  async sendDue(): Promise<number> {
    const { db, clock, stripe, config, log } = this.#deps;
    if (!stripe) return 0;
    const now = await currentTime(db, clock);
    let sent = 0;
    for (const report of await dueMeterReports(db, now, BATCH)) {
      if (!report.payment_customer_id) continue;
      try {
        await stripe.billing.meterEvents.create({
          event_name: config.stripe.meterEventName,
          identifier: report.id,
          timestamp: Math.floor(report.created_at.getTime() / 1000),
          payload: { stripe_customer_id: report.payment_customer_id, value: String(report.value_cents) },
        });
        await markMeterReport(db, report.id, { sentAt: now });
        sent++;
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        // Stripe refuses an identifier it has seen (400 "An event already exists with
        // identifier ..."): an earlier send of this very report reached it, so it is counted.
        if (
          err instanceof Stripe.errors.StripeInvalidRequestError &&
          /already exists with identifier/i.test(message)
        ) {
          await markMeterReport(db, report.id, { sentAt: now });
          continue;
        }
        log.warn({ reportId: report.id, err: message }, 'usage report to Stripe failed; will retry');
        await markMeterReport(db, report.id, {
          error: message.slice(0, 500),
          nextAttemptAt: new Date(now.getTime() + retryDelayMs(report.attempts)),
        });
      }
    }
    return sent;
  }

  async #pass(): Promise<void> {
    try {
      await this.sendDue();
    } catch (err) {
      this.#deps.log.error({ err }, 'usage reporting failed; retrying');
    }
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.wake(), POLL_MS);
    this.#timer.unref();
  }
}
