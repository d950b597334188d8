-- A task's checks on each of its runs: a cost cap (cents per run; null: none), a JSON Schema
-- the final output must match (null: none) and the tools the model must have called (a JSON
-- array of names; null: none). A run that fails a check ends `failed`, its output kept. The
-- schema is `json`, not `jsonb`: its text is kept as written, keys in their order, which is
-- the order a model writes the properties of a structured answer in.
ALTER TABLE tasks
  ADD COLUMN max_cost_cents_per_run numeric CHECK (max_cost_cents_per_run >= 0),
  ADD COLUMN output_schema json,
  ADD COLUMN required_tools jsonb;
