-- Several statements of the service in one round trip and one transaction
-- (src/db/sql/statement-batch.ts).
--
-- A worker records the ends of several runs together: lock their rows, add the usage of their
-- last model calls, then record each end. Sent one by one in a transaction, that was BEGIN, a
-- round trip per statement and COMMIT, and the round trips, not the statements, were most of
-- what it cost the worker process (a loopback write wakes the database's backend each time).
-- This function runs them in one statement that commits by itself: `batch` is
-- {"texts": [statement text, ...], "statements": [[text index, [parameter, ...]], ...]}, each
-- parameter in its text form (or null). The statements run in their order, each with a new
-- snapshot (the function is VOLATILE), as they would one after the other in a READ COMMITTED
-- transaction; an error in any of them rolls back all of them. Each statement must be one that
-- returns rows (a SELECT, or a write with RETURNING); of each, its first row is returned as
-- [position in the batch, the row as a JSON object], and a statement that returned no row
-- returns nothing.
--
-- The texts come from the service's own code and are constants: each is prepared once per
-- connection (named by its digest, so a changed text is a new statement), its parameters'
-- types inferred from the text as the driver's own statements' are, and planned once, for any
-- values (force_generic_plan), as the claim's statements are (0020): the statements batched are
-- writes by primary key or by arrays of keys, whose plans do not depend on the values, and
-- planning them each time cost more than running them (measured with pg_stat_statements: the
-- usage statement planned in 0.33 ms and ran in 0.37 ms; the notification of an end planned in
-- 0.25 ms and ran in 0.10 ms). A plan made once may be made on empty tables (a new
-- installation, a worker started before the first runs), where a sequential scan looks
-- cheapest, and it is kept until the table is analysed (never, on the embedded database): the
-- generic plans of the lock and usage statements read runs, tasks and usage_ledger by
-- sequential scans there. Every statement batched reaches its rows by key, so sequential scans
-- are disabled for them (the planner then takes the indexes whatever the tables' size).
CREATE FUNCTION svc_batch(batch jsonb) RETURNS SETOF json LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  names text[] := '{}';
  statement_text text;
  statement_name text;
  item jsonb;
  position integer := 0;
  literals text;
  result record;
  returned bigint;
BEGIN
  FOR statement_text IN SELECT t FROM jsonb_array_elements_text(batch -> 'texts') AS t LOOP
    statement_name := 'svc_batch_' || md5(statement_text);
    IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements p WHERE p.name = statement_name) THEN
      EXECUTE format('PREPARE %I AS %s', statement_name, statement_text);
    END IF;
    names := names || statement_name;
  END LOOP;
  FOR item IN SELECT s FROM jsonb_array_elements(batch -> 'statements') AS s LOOP
    SELECT string_agg(quote_nullable(e.v), ', ' ORDER BY e.k) INTO literals
      FROM jsonb_array_elements_text(item -> 1) WITH ORDINALITY AS e(v, k);
    EXECUTE format('EXECUTE %I%s', names[(item ->> 0)::integer + 1], coalesce('(' || literals || ')', ''))
      INTO result;
    GET DIAGNOSTICS returned = ROW_COUNT;
    IF returned > 0 THEN
      RETURN NEXT json_build_array(position, to_json(result));
    END IF;
    position := position + 1;
  END LOOP;
END $$;
