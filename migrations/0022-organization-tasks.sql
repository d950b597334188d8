-- The task list of one organization (GET /tasks), planned once per connection.
--
-- A list names its organization as a parameter, and PostgreSQL plans a parameterised statement
-- for the values at hand (a custom plan) as long as its one plan for any value (the generic
-- plan) is costed above them: with organizations of different sizes, the generic plan is
-- costed for the average one, so a small organization's list was planned anew for every
-- request (the planning took twice as long as the read: 0.38 against 0.18 ms). This function
-- reads the organization's tasks by its index whatever the sizes (sequential scans off, one
-- generic plan), and the statement around it, whose cost no longer depends on the
-- organization, is planned once too. The list's order is the caller's (an ORDER BY of at most
-- the organization's task limit of rows).
CREATE FUNCTION svc_organization_tasks(organization uuid) RETURNS SETOF tasks
LANGUAGE plpgsql STABLE ROWS 50
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
  RETURN QUERY SELECT * FROM tasks WHERE organization_id = organization;
END $$;
