-- Delivery jobs: one per (finished run, destination), created in the same statement that
-- records the run's end, so no finished run can lack its deliveries. A dispatcher claims a due
-- job under a lease (like runs), makes one attempt and records it; failed attempts are retried
-- on a backoff schedule until one succeeds or the schedule is used up.
CREATE TABLE deliveries (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  -- The task destination it came from; null for the legacy deliveryEmail/deliverySms flags.
  -- No foreign key: a destination removed later leaves its deliveries as they were.
  destination_id uuid,
  channel text NOT NULL CHECK (channel IN ('email', 'sms', 'webhook')),
  -- The address, number or URL as it was when the run ended.
  target text NOT NULL,
  label text,
  position integer NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'sending', 'delivered', 'failed')),
  -- Attempts in all, and in the current round (a redelivery starts a new round of the schedule).
  attempts integer NOT NULL DEFAULT 0,
  round_attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  lease_owner text,
  lease_expires_at timestamptz,
  last_error text,
  delivered_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (run_id, position)
);
-- The dispatcher's two questions: which pending jobs are due, whose lease expired.
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_sending_idx ON deliveries (lease_expires_at) WHERE status = 'sending';

CREATE TABLE delivery_attempts (
  delivery_id uuid NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  started_at timestamptz NOT NULL,
  duration_ms integer NOT NULL,
  outcome text NOT NULL CHECK (outcome IN ('delivered', 'failed')),
  status_code integer,
  error text,
  -- The start of the receiver's answer.
  response text,
  PRIMARY KEY (delivery_id, attempt)
);
