-- Unattended runs: a task pauses itself after a number of consecutive failed runs, tells its
-- destinations so in a task notice, and may deliver only changed outputs or only failures.

-- autoPauseAfterFailures (0 = never), deliverOn, and what the run-end statement keeps per task:
-- the failure count, why the task paused itself, and the last completed run whose output was
-- sent out (the one a `change` task compares with).
ALTER TABLE tasks
  ADD COLUMN auto_pause_after_failures integer NOT NULL DEFAULT 5
    CHECK (auto_pause_after_failures BETWEEN 0 AND 100),
  ADD COLUMN deliver_on text NOT NULL DEFAULT 'always'
    CHECK (deliver_on IN ('always', 'change', 'failure')),
  ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0,
  ADD COLUMN paused_reason text,
  -- No foreign key: runs are only deleted with their task.
  ADD COLUMN last_delivered_run_id uuid;

-- A delivery job is either a run's (kind `run`, run_id set) or a task notice (task_id set,
-- run_id null, its words in payload). Notices go through the same queue, retries and attempt
-- log as runs. A suppressed job (deliverOn) records a destination a run was not sent to.
ALTER TABLE deliveries
  ALTER COLUMN run_id DROP NOT NULL,
  ADD COLUMN kind text NOT NULL DEFAULT 'run'
    CHECK (kind IN ('run', 'task.paused', 'task.cost_limit_reached')),
  ADD COLUMN task_id uuid REFERENCES tasks (id) ON DELETE CASCADE,
  ADD COLUMN payload jsonb,
  -- deliverOn `change`: the run whose output this one's diff is against.
  ADD COLUMN previous_run_id uuid,
  ADD CONSTRAINT deliveries_subject_check
    CHECK (CASE WHEN kind = 'run' THEN run_id IS NOT NULL ELSE run_id IS NULL AND task_id IS NOT NULL END);

ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
  CHECK (status IN ('pending', 'sending', 'delivered', 'failed', 'suppressed'));

-- A task's notices, newest first (the task page; the bound kept when one is queued).
CREATE INDEX deliveries_task_notices_idx ON deliveries (task_id, created_at DESC) WHERE task_id IS NOT NULL;
