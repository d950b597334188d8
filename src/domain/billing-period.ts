// Billing periods are monthly, counted from the organization's anchor (its creation, or the
// start of the period its last paid invoice covers). Pure date arithmetic in UTC.

/** The anchor moved by `months` calendar months, its day clamped to the month's last day. */
function addMonths(anchor: Date, months: number): Date {
  const y = anchor.getUTCFullYear();
  const m = anchor.getUTCMonth() + months;
  const lastDay = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  const day = Math.min(anchor.getUTCDate(), lastDay);
  return new Date(
    Date.UTC(
      y,
      m,
      day,
      anchor.getUTCHours(),
      anchor.getUTCMinutes(),
      anchor.getUTCSeconds(),
      anchor.getUTCMilliseconds(),
    ),
  );
}

/**
 * The start of the period `now` falls in: the latest monthly anniversary of `anchor` that is
 * not after `now` (the anchor itself before its first anniversary). An anchor on the 31st
 * gives the last day of shorter months, as Stripe's billing cycles do.
 */
export function currentPeriodStart(anchor: Date, now: Date): Date {
  if (now.getTime() <= anchor.getTime()) return anchor;
  let months =
    (now.getUTCFullYear() - anchor.getUTCFullYear()) * 12 + (now.getUTCMonth() - anchor.getUTCMonth());
  while (months > 0 && addMonths(anchor, months).getTime() > now.getTime()) months--;
  return addMonths(anchor, months);
}

/** When the period `now` falls in ends: the next anniversary of `anchor` after its start. */
export function currentPeriodEnd(anchor: Date, now: Date): Date {
  const start = currentPeriodStart(anchor, now);
  let months =
    (start.getUTCFullYear() - anchor.getUTCFullYear()) * 12 +
    (start.getUTCMonth() - anchor.getUTCMonth()) +
    1;
  while (addMonths(anchor, months).getTime() <= start.getTime()) months++;
  return addMonths(anchor, months);
}
