-- The run queue: a worker holds a run through a lease that it renews while it works. A run whose
-- lease expires (its worker died) is handed to another worker, or failed after max attempts.

ALTER TABLE runs
  ADD COLUMN lease_owner text,
  ADD COLUMN lease_expires_at timestamptz,
  -- How many times a worker has started this run (a takeover after a lost lease counts again).
  ADD COLUMN attempts integer NOT NULL DEFAULT 0;

-- Expired leases are found through this index (only running runs hold one).
CREATE INDEX runs_running_lease_idx ON runs (lease_expires_at) WHERE status = 'running';
-- Per-organization concurrency counts the organization's running runs.
CREATE INDEX runs_running_org_idx ON runs (organization_id) WHERE status = 'running';
-- The overlap rule asks whether a task has a run pending or running.
CREATE INDEX runs_task_in_flight_idx ON runs (task_id) WHERE status IN ('pending', 'running');
