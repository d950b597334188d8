-- Tasks, skills, sources, destinations, runs and the usage ledger.

CREATE TABLE skills (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  slug text NOT NULL,
  content text NOT NULL,
  category text,
  description text,
  frontmatter jsonb,
  icon_url text,
  is_public boolean NOT NULL DEFAULT false,
  is_user_invocable boolean NOT NULL DEFAULT true,
  version integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (organization_id, slug)
);
CREATE INDEX skills_org_created_idx ON skills (organization_id, created_at DESC, id);

CREATE TABLE sources (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  slug text NOT NULL,
  type text NOT NULL CHECK (type IN ('mcp', 'api', 'local')),
  -- The config without its secret values (config.env values are sealed below).
  config jsonb NOT NULL DEFAULT '{}'::jsonb,
  auth_type text CHECK (auth_type IN ('none', 'oauth', 'bearer', 'basic', 'header', 'query', 'api_key', 'connector')),
  -- authConfig without its credentials.
  auth_config jsonb,
  -- Sealed JSON object of secret values: { "env": { NAME: value }, "credentials": { ... } }.
  secrets_sealed text,
  description text,
  icon_url text,
  is_active boolean NOT NULL DEFAULT false,
  last_connected_at timestamptz,
  tools jsonb,
  connector_toolkit text,
  connector_connected boolean,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (organization_id, slug)
);
CREATE INDEX sources_org_created_idx ON sources (organization_id, created_at DESC, id);

CREATE TABLE tasks (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  prompt text NOT NULL,
  model text NOT NULL,
  schedule text NOT NULL CHECK (schedule IN ('once', 'hourly', 'daily', 'weekly')),
  status text NOT NULL CHECK (status IN ('active', 'paused', 'completed')),
  cron_expression text,
  schedule_time text,
  schedule_days text[],
  timezone text NOT NULL DEFAULT 'UTC',
  delivery_email boolean,
  delivery_email_address text,
  delivery_sms boolean,
  delivery_phone_number text,
  user_id text,
  next_run_at timestamptz,
  last_run_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE INDEX tasks_org_created_idx ON tasks (organization_id, created_at DESC, id);
-- The scheduler's question, "which active tasks are due?", reads only this index.
CREATE INDEX tasks_due_idx ON tasks (next_run_at) WHERE status = 'active' AND next_run_at IS NOT NULL;

CREATE TABLE task_skills (
  task_id uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  skill_id uuid NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
  position integer NOT NULL,
  PRIMARY KEY (task_id, skill_id)
);
CREATE INDEX task_skills_skill_idx ON task_skills (skill_id);

CREATE TABLE task_sources (
  task_id uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  source_id uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
  position integer NOT NULL,
  PRIMARY KEY (task_id, source_id)
);
CREATE INDEX task_sources_source_idx ON task_sources (source_id);

CREATE TABLE task_destinations (
  id uuid PRIMARY KEY,
  task_id uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  type text NOT NULL CHECK (type IN ('email', 'sms', 'webhook')),
  value text NOT NULL,
  label text,
  position integer NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX task_destinations_task_idx ON task_destinations (task_id, position);

CREATE TABLE runs (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  task_id uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  -- The schedule slot this run is for; null for on-demand runs.
  slot_at timestamptz,
  trigger text NOT NULL CHECK (trigger IN ('schedule', 'manual')),
  status text NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed')),
  delivery_status text CHECK (delivery_status IN ('pending', 'delivered', 'failed')),
  output text,
  error text,
  cost_cents numeric NOT NULL DEFAULT 0,
  tokens_used integer NOT NULL DEFAULT 0,
  duration_ms integer,
  created_at timestamptz NOT NULL,
  started_at timestamptz,
  completed_at timestamptz,
  -- Never two runs for one slot of one task, whatever the number of schedulers.
  UNIQUE (task_id, slot_at)
);
CREATE INDEX runs_org_created_idx ON runs (organization_id, created_at DESC, id);
CREATE INDEX runs_task_created_idx ON runs (task_id, created_at DESC, id);
CREATE INDEX runs_pending_idx ON runs (created_at) WHERE status = 'pending';

-- The usage ledger: one row per run, written when the run is created and updated when it
-- ends. It has no foreign key to tasks or runs: deleting either never lowers usage.
CREATE TABLE usage_ledger (
  run_id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  task_id uuid NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed')),
  cost_cents numeric NOT NULL DEFAULT 0,
  tokens_used integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL
);
CREATE INDEX usage_ledger_org_created_idx ON usage_ledger (organization_id, created_at);
