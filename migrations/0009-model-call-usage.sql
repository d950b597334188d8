-- Usage per model call. A worker writes a call's tokens and cost as soon as it has read the
-- provider's answer, before acting on it, and adds them to the run's usage-ledger row in the
-- same statement; nothing that happens to the run afterwards (its task deleted, its lease lost,
-- its worker stopped) can take them back. The id is chosen by the worker before the write, so
-- a write retried after a lost connection is counted once.
CREATE TABLE usage_calls (
  id uuid PRIMARY KEY,
  -- No foreign key to runs, like the ledger: a deleted run keeps its calls.
  run_id uuid NOT NULL,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  -- The provider's id of the answer (a Chat Completions `id`), to reconcile with its records.
  provider_call_id text,
  tokens_used integer NOT NULL CHECK (tokens_used >= 0),
  cost_cents numeric NOT NULL CHECK (cost_cents >= 0),
  created_at timestamptz NOT NULL
);
CREATE INDEX usage_calls_run_idx ON usage_calls (run_id);
