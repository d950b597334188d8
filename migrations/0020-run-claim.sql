-- The worker's claim in one round trip (src/db/sql/run-claim.ts).
--
-- A claim picks the runs it would take, locks the organizations they belong to and only then
-- counts those organizations' running runs: the count must be read after the locks are held,
-- or a claim that another worker committed while this one waited would be missed and the
-- per-organization limit exceeded. Under READ COMMITTED that takes statements one after the
-- other (a statement reads one snapshot, taken when it starts), which from the client would
-- cost BEGIN, a round trip per statement and COMMIT. A VOLATILE function takes a new snapshot
-- for each statement it runs, so this one runs them all as one statement that commits by
-- itself: `pick_query` ($1: `args`; its one value is returned as the first row; `keys` in it
-- are the lock keys), the transaction-level advisory locks (`lock_class`, key) in ascending key
-- order, so that two claims never wait for each other in a cycle, and `query` ($1: `args`, $2:
-- the pick's value), whose one value, a JSON array, is returned an element a row. Nothing
-- picked: nothing locked, `query` not run.
--
-- Both texts come from the service's own code. Each is prepared once per connection (named by
-- its digest, so a changed text is a new statement) and planned once, for any values
-- (force_generic_plan): planning them, not running them, was most of a claim's cost, and
-- their shape (a loose index scan, LATERAL ... LIMIT per organization) is fixed by the text,
-- not by the values they are run with.
CREATE FUNCTION svc_lock_then_query(lock_class integer, pick_query text, query text, args jsonb)
RETURNS SETOF json LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  pick_name text := 'svc_pick_' || md5(pick_query);
  query_name text := 'svc_query_' || md5(query);
  picked jsonb;
  result json;
  lock_key integer;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = pick_name) THEN
    EXECUTE format('PREPARE %I(jsonb) AS %s', pick_name, pick_query);
  END IF;
  EXECUTE format('EXECUTE %I(%L)', pick_name, args) INTO picked;
  RETURN NEXT picked::json;
  IF coalesce(jsonb_array_length(picked -> 'keys'), 0) = 0 THEN
    RETURN;
  END IF;
  FOR lock_key IN SELECT k::integer FROM jsonb_array_elements_text(picked -> 'keys') AS k ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock(lock_class, lock_key);
  END LOOP;
  IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = query_name) THEN
    EXECUTE format('PREPARE %I(jsonb, jsonb) AS %s', query_name, query);
  END IF;
  EXECUTE format('EXECUTE %I(%L, %L)', query_name, args, picked) INTO result;
  RETURN QUERY SELECT json_array_elements(result);
END $$;
