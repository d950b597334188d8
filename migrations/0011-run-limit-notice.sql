-- When the organization was first refused a run by its plan's runsLimit (a scheduled slot
-- skipped, or a run-now answered 403) in a billing period. Set once per period, under the
-- organization's row lock, so however many schedulers and API processes refuse runs, the
-- organization is told once: one log line, and `runsLimitReachedAt` in its billing status.
ALTER TABLE organizations ADD COLUMN run_limit_reached_at timestamptz;
