// Metered usage: on the paid plan, run costs beyond the plan's credits are reported to Stripe
// as meter events. Reports go through an outbox (meter_reports): a row is written first, in
// the run's organization lock, then sent with its id as the event's `identifier`. Stripe
// counts an identifier once, so a report sent twice (a crash after sending, two workers) is
// billed once, and none is lost to a crash before sending.
import {
  claimMeterReport,
  queueMeterReport,
  recoverExpiredMeterReports,
  settleMeterReport,
} from '../db/sql/billing.ts';
import { notify } from '../db/sql/notify.ts';
import { findOrganization } from '../db/sql/organizations.ts';
import { periodUsage } from '../db/sql/usage.ts';
import { currentPeriodStart } from '../domain/billing-period.ts';
import type { Deps } from '../domain/deps.ts';
import { effectiveLimits } from '../domain/plans.ts';
import { leaseOwnerId, newId } from '../lib/ids.ts';
import { Loop } from '../lib/loop.ts';

/** Reports sent per pass; the rest wait for the next one. */
const BATCH = 50;
/**
 * How long a claimed report is this reporter's: longer than one Stripe request can take with
 * its retries (15 s each, two retries), so a live reporter never loses one.
 */
const LEASE_MS = 120_000;
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
    const now = await clock.agreedNow(tx);
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
  readonly id = leaseOwnerId();
  readonly #deps: Deps;
  /** Looks at each NOTIFY svc_billing and every POLL_MS (a failed report's retry time, at most). */
  readonly #loop: Loop;

  constructor(deps: Deps) {
    this.#deps = deps;
    this.#loop = new Loop({
      name: 'usage reporter',
      pass: async () => {
        await this.sendDue();
        return POLL_MS;
      },
      pollMs: POLL_MS,
      retryMs: POLL_MS,
      channel: { name: 'svc_billing', listen: (c, f) => deps.db.listen(c, f) },
      log: deps.log,
    });
  }

  async start(): Promise<void> {
    await this.#loop.start();
  }

  wake(): void {
    this.#loop.wake();
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
  }

  /**
   * Sends every due report once, each taken under a lease first (one at a time: the lease needs
   * to outlast one Stripe request with its retries, not a batch); returns how many were sent.
   */
  async sendDue(): Promise<number> {
    const { db, clock, stripe, config, log } = this.#deps;
    if (!stripe) return 0;
    const recovered = await recoverExpiredMeterReports(db, await clock.agreedNow(db));
    if (recovered) log.warn({ recovered }, 'usage reports of a stopped reporter are due again');
    let sent = 0;
    for (let i = 0; i < BATCH; i++) {
      const now = await clock.agreedNow(db);
      const report = await claimMeterReport(db, { owner: this.id, now, leaseMs: LEASE_MS });
      if (!report) break;
      // Claimable reports have a customer; one removed meanwhile waits for its lease to expire.
      if (!report.payment_customer_id) continue;
      const settle = async (outcome: Parameters<typeof settleMeterReport>[3]) => {
        if (!(await settleMeterReport(db, report.id, this.id, outcome)))
          log.warn({ reportId: report.id }, 'usage report outcome not recorded: its lease had expired');
      };
      try {
        await stripe.billing.meterEvents.create({
          event_name: config.stripe.meterEventName,
          identifier: report.id,
          timestamp: Math.floor(report.created_at.getTime() / 1000),
          payload: { stripe_customer_id: report.payment_customer_id, value: String(report.value_cents) },
        });
        await settle({ sentAt: now });
        sent++;
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        // Stripe refuses an identifier it has seen (400 "An event already exists with
        // identifier ..."): an earlier send of this very report reached it, so it is counted.
        if (
          err instanceof stripe.errors.StripeInvalidRequestError &&
          /already exists with identifier/i.test(message)
        ) {
          await settle({ sentAt: now });
          continue;
        }
        log.warn({ reportId: report.id, err: message }, 'usage report to Stripe failed; will retry');
        await settle({
          error: message.slice(0, 500),
          nextAttemptAt: new Date(now.getTime() + retryDelayMs(report.attempts)),
        });
      }
    }
    return sent;
  }
}
