-- The worker's claim in one round trip (src/db/sql/run-claim.ts).
--
-- A claim picks the runs it would take, locks the organizations they belong to and only then
-- counts those organizations' running runs: the count must be read after the locks are held,
-- or a claim that another worker committed while this one waited would be missed and the
-- per-organization limit exceeded. Under READ COMMITTED that takes statements one after the
-- other (a statement reads one snapshot, taken when it starts), which from the client would
-- cost BEGIN, a round trip per statement and COMMIT. A VOLATILE function takes a new snapshot
-- for each statement it runs, so this one runs them all as one statement that commits by
-- itself: `pick_query` (its one value is returned as the first row; `keys` in it are the lock
-- keys), the transaction-level advisory locks (`lock_class`, key) in ascending key order, so
-- that two claims never wait for each other in a cycle, and `query`, which gets `args` as $1
-- and the pick's value as $2 and whose rows follow. Nothing picked: nothing locked, `query`
-- not run. Both texts come from the service's own code; EXECUTE plans them for each call's
-- values, as the claim needs (its LIMITs and skewed backlogs).
CREATE FUNCTION svc_lock_then_query(lock_class integer, pick_query text, query text, args jsonb)
RETURNS SETOF json LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  picked jsonb;
  lock_key integer;
BEGIN
  EXECUTE pick_query INTO picked USING args;
  RETURN NEXT picked::json;
  IF coalesce(jsonb_array_length(picked -> 'keys'), 0) = 0 THEN
    RETURN;
  END IF;
  FOR lock_key IN SELECT k::integer FROM jsonb_array_elements_text(picked -> 'keys') AS k ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock(lock_class, lock_key);
  END LOOP;
  RETURN QUERY EXECUTE query USING args, picked;
END $$;
