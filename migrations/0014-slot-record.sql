-- A record of every schedule slot the scheduler passes: what became of it (a run, or why not),
-- written by the statement that decides it. At most one record per slot; a record whose
-- `slots` is above 1 stands for that many consecutive missed slots (the oldest ones of a long
-- outage, folded so one claim writes a bounded number of rows). A task holds at most 500 (the
-- scheduler prunes the oldest); deleting a task deletes its records.
CREATE TABLE task_slots (
  task_id uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
  slot_at timestamptz NOT NULL,
  outcome text NOT NULL
    CHECK (outcome IN ('ran', 'skipped_overlap', 'missed', 'skipped_budget', 'skipped_run_limit')),
  run_id uuid,
  slots integer NOT NULL DEFAULT 1 CHECK (slots >= 1),
  reason text,
  recorded_at timestamptz NOT NULL,
  PRIMARY KEY (task_id, slot_at)
);

-- How many records the task has, at most (the scheduler writes it with each claim): the
-- scheduler prunes a task's records only when this passes the bound, not at every claim.
ALTER TABLE tasks ADD COLUMN slot_records integer NOT NULL DEFAULT 0;

-- A task's monthly cost limit (absent: none), and when its scheduled slots or a run now were
-- first refused by it in the organization's billing period (set once per period, under the
-- task's row lock, so the task's destinations are told once).
ALTER TABLE tasks ADD COLUMN monthly_cost_limit_cents numeric CHECK (monthly_cost_limit_cents >= 0);
ALTER TABLE tasks ADD COLUMN cost_limit_reached_at timestamptz;

-- A task's cost in a period is summed from its ledger rows.
CREATE INDEX usage_ledger_task_created_idx ON usage_ledger (task_id, created_at);
