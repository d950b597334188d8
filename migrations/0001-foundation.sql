-- Organizations, API keys, rate-limit counters and service metadata.

CREATE TABLE service_meta (
  key text PRIMARY KEY,
  value text NOT NULL
);

CREATE TABLE organizations (
  id uuid PRIMARY KEY,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
  plan text NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'paid')),
  -- Operator overrides of the plan's limits (enterprise): absent key = the plan's value;
  -- "runsLimit": null = unlimited runs.
  limit_overrides jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- Standard Webhooks signing secret, sealed with SVC_SECRET_KEY.
  webhook_secret_sealed text NOT NULL,
  billing_period_start timestamptz NOT NULL DEFAULT now(),
  payment_customer_id text,
  payment_subscription_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
  -- Only a SHA-256 of the key is kept (hex); the value itself is shown once, at creation.
  key_hash text NOT NULL UNIQUE,
  display_prefix text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz,
  revoked_at timestamptz,
  last_used_at timestamptz
);
CREATE INDEX api_keys_organization_idx ON api_keys (organization_id, created_at DESC);

-- Fixed one-minute windows, shared by every process. UNLOGGED: no WAL, so a counter bump
-- does not wait for a disk flush; a crash only resets the current minute. Rows older than the current window are
-- pruned by the api role's maintenance loop.
CREATE UNLOGGED TABLE rate_limit_counters (
  bucket text NOT NULL,
  window_start bigint NOT NULL,
  hits integer NOT NULL,
  PRIMARY KEY (bucket, window_start)
);
