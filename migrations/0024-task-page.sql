-- A page of an organization's tasks (GET /tasks), planned once per connection.
--
-- The page's statement names its organization and its page size as parameters, and PostgreSQL
-- keeps one generic plan for a prepared statement only while that plan is costed about as low
-- as a plan for the values at hand. Once the tasks table has been analysed with organizations of
-- different sizes, the generic plan is costed for an organization of average size, far above
-- the plan for a small one, and the statement was planned anew at every request: measured on
-- one connection, 15,000 tasks of another organization, analysed, 3,000 pages of 20 tasks, the
-- backend's CPU per page went from 93-111 µs to 170 µs (the service's list fell from 0.74x of
-- its floor in the benchmark's first round to 0.57-0.59x in the rounds after the creates).
-- 0022 fixed the same for the whole list (svc_organization_tasks); the API reads it a page at a
-- time, so this function walks the organization's index in order and stops after `n` rows,
-- with sequential scans off and one generic plan, whatever the organizations' sizes. The
-- statement around it adds each task's newest run and its position.
CREATE FUNCTION svc_task_page(organization uuid, after_at timestamptz, after_id uuid, n integer)
RETURNS SETOF tasks LANGUAGE plpgsql STABLE ROWS 50
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
  IF after_at IS NULL THEN
    RETURN QUERY SELECT * FROM tasks WHERE organization_id = organization
      ORDER BY created_at DESC, id DESC LIMIT n;
  ELSE
    RETURN QUERY SELECT * FROM tasks WHERE organization_id = organization
      AND (created_at, id) < (after_at, after_id)
      ORDER BY created_at DESC, id DESC LIMIT n;
  END IF;
END $$;
