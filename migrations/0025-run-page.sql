-- A page of an organization's runs, or of one task's (GET /runs, GET /tasks/{id}/runs), planned
-- once per connection, as a page of tasks is (0024): organizations and tasks have runs by the
-- hundred thousand and by the handful, and the pages' plain statements were planned anew at
-- each request once the table had been analysed with such differences. This function walks the
-- organization's index, or the task's, in order and stops after `n` rows, with sequential scans
-- off and one generic plan per branch.
CREATE FUNCTION svc_run_page(organization uuid, task uuid, after_at timestamptz, after_id uuid, n integer)
RETURNS SETOF runs LANGUAGE plpgsql STABLE ROWS 50
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
  IF task IS NULL AND after_at IS NULL THEN
    RETURN QUERY SELECT * FROM runs WHERE organization_id = organization
      ORDER BY created_at DESC, id DESC LIMIT n;
  ELSIF task IS NULL THEN
    RETURN QUERY SELECT * FROM runs WHERE organization_id = organization
      AND (created_at, id) < (after_at, after_id)
      ORDER BY created_at DESC, id DESC LIMIT n;
  ELSIF after_at IS NULL THEN
    RETURN QUERY SELECT * FROM runs WHERE organization_id = organization AND task_id = task
      ORDER BY created_at DESC, id DESC LIMIT n;
  ELSE
    RETURN QUERY SELECT * FROM runs WHERE organization_id = organization AND task_id = task
      AND (created_at, id) < (after_at, after_id)
      ORDER BY created_at DESC, id DESC LIMIT n;
  END IF;
END $$;
