-- Runs that can be stopped and replayed.
--
-- A cancel ends a pending or running run at once, `failed` with an error starting "Canceled",
-- and sets `canceled_at`: it tells a canceled run from one that failed by itself (the worker
-- holding a running run is reached with NOTIFY svc_run_cancel and stops its execution).
--
-- A replay is a new run of the same task (`trigger = 'replay'`, `replay_of` the run it
-- replays), executed with the task's current prompt, skills and sources but the time context
-- of the original: `replay_context_at` is the instant its time context names as now (the
-- original's slot, or its creation for a run started on demand) and `replay_slot_at` the slot
-- it names (null when the original was not scheduled). A replay's slot is not `slot_at`: a
-- slot keeps at most one scheduled run (UNIQUE (task_id, slot_at)) and a slot may be replayed
-- any number of times. `model` is the model a replay was asked to use; null means the task's.
-- `replay_of` has no foreign key: a run and its replays belong to one task and are deleted
-- with it, together.
ALTER TABLE runs DROP CONSTRAINT runs_trigger_check;
ALTER TABLE runs ADD CONSTRAINT runs_trigger_check CHECK (trigger IN ('schedule', 'manual', 'replay'));
ALTER TABLE runs
  ADD COLUMN canceled_at timestamptz,
  ADD COLUMN replay_of uuid,
  ADD COLUMN replay_context_at timestamptz,
  ADD COLUMN replay_slot_at timestamptz,
  ADD COLUMN model text,
  ADD CONSTRAINT runs_replay_fields CHECK ((trigger = 'replay') = (replay_of IS NOT NULL AND replay_context_at IS NOT NULL));
