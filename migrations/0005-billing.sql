-- Billing: Stripe webhook events already applied (idempotency), the ordering of subscription
-- events, runs refused by the plan's run limit, and the outbox of metered usage reports.

CREATE TABLE billing_events (
  event_id text PRIMARY KEY,
  type text NOT NULL,
  received_at timestamptz NOT NULL
);

ALTER TABLE organizations
  -- The Stripe subscription's status as last applied, and the `created` time of the event that
  -- set it: an older event arriving later does not undo a newer one.
  ADD COLUMN subscription_status text,
  ADD COLUMN subscription_event_at timestamptz;

-- A run refused because the plan's run limit was reached consumed nothing and does not count
-- towards runsUsed.
ALTER TABLE usage_ledger ADD COLUMN counted boolean NOT NULL DEFAULT true;

-- Usage beyond the plan's credits, reported to Stripe as meter events. A row is written before
-- it is sent, and its id is the event's `identifier`, so a report sent twice (a crash between
-- sending and marking it sent) is counted once by Stripe.
CREATE TABLE meter_reports (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  period_start timestamptz NOT NULL,
  value_cents integer NOT NULL CHECK (value_cents > 0),
  created_at timestamptz NOT NULL,
  sent_at timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL,
  last_error text
);
CREATE INDEX meter_reports_unsent_idx ON meter_reports (next_attempt_at) WHERE sent_at IS NULL;
CREATE INDEX meter_reports_org_period_idx ON meter_reports (organization_id, period_start);
