-- How svc_batch (0021) and svc_lock_then_query (0020) find and name the statements they prepare.
--
-- 1. Found without reading pg_prepared_statements.
--
-- Both functions prepare each text they are given once per connection and, at every call,
-- looked for it in pg_prepared_statements first. That view is a function that builds a row
-- for every statement the connection has prepared, with its whole text, parameter types and
-- counters: with the service's few dozen statements it cost 13-15 µs per look (measured with
-- pg_stat_statements, a worker at concurrency 1 with an instant model: four looks per run,
-- 60 µs of the database's time per run).
--
-- Now a connection marks each statement it prepared with a setting of its own
-- (`svc_prepared.<name>`, set_config: a hash lookup, like any setting). The mark is only a
-- hint that the statement exists: a setting made in a transaction that rolls back is undone
-- while the statement stays prepared (PREPARE is not transactional), and RESET ALL (DISCARD
-- ALL) clears the marks; an unmarked statement is looked for in pg_prepared_statements as
-- before, prepared only if missing, and marked. Nothing in the service deallocates a
-- statement; a DEALLOCATE by hand without RESET ALL would leave a mark without its statement,
-- and the next call would fail with "prepared statement does not exist" rather than run
-- anything else (the name is the text's digest).
--
-- 2. Statement batches (svc_batch) name their statements instead of sending their texts.
--
-- A batch carried the whole text of each of its statements, in its jsonb parameter, at every
-- call: a run's end batch is about 8 KB of SQL, which the database parsed as JSON and hashed
-- (md5, the statement's name) each time, though each connection prepares a text once. Measured
-- on one connection: five statements of 2 KB text cost 90-95 µs more per batch than the same
-- five with short texts; the batches of a run (its creation, usage and end) carry about 10 KB.
--
-- Now the service sends each statement's name (`svc_batch_` and the md5 of its text, the name
-- it was already prepared under) and the texts only until a batch carrying them has committed
-- in that process; every text a batch carries is kept in `svc_statement_texts`, so that a
-- connection that has not prepared a statement yet reads its text there. A name without a
-- text, neither prepared on the connection nor kept (the table emptied by hand), is an error
-- with SQLSTATE SVC01, and the service sends the batch again with its texts. A batch in the
-- old form ({"texts": [...]}, from a process of the previous version during an upgrade) is
-- named here as before and run the same way.
CREATE TABLE svc_statement_texts (
  name text PRIMARY KEY,
  text text NOT NULL,
  CHECK (name = 'svc_batch_' || md5(text))
);

CREATE OR REPLACE FUNCTION svc_batch(batch jsonb) RETURNS SETOF json LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  names text[] := '{}';
  statement_text text;
  statement_name text;
  i integer;
  item jsonb;
  position integer := 0;
  literals text;
  result record;
  returned bigint;
BEGIN
  -- The old form names its statements here, as 0021 did.
  IF NOT batch ? 'names' THEN
    batch := batch || jsonb_build_object('names', coalesce(
      (SELECT jsonb_agg('svc_batch_' || md5(t) ORDER BY k)
         FROM jsonb_array_elements_text(batch -> 'texts') WITH ORDINALITY AS e(t, k)), '[]'::jsonb));
  END IF;
  FOR i IN 0 .. jsonb_array_length(batch -> 'names') - 1 LOOP
    statement_name := batch -> 'names' ->> i;
    statement_text := batch -> 'texts' ->> i;
    IF statement_text IS NOT NULL THEN
      INSERT INTO svc_statement_texts (name, text) VALUES (statement_name, statement_text)
        ON CONFLICT (name) DO NOTHING;
    END IF;
    IF coalesce(current_setting('svc_prepared.' || statement_name, true), '') = '' THEN
      IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements p WHERE p.name = statement_name) THEN
        IF statement_text IS NULL THEN
          SELECT t.text INTO statement_text FROM svc_statement_texts t WHERE t.name = statement_name;
          IF NOT FOUND THEN
            RAISE EXCEPTION 'the statement % is not known here; send its text', statement_name
              USING ERRCODE = 'SVC01';
          END IF;
        END IF;
        EXECUTE format('PREPARE %I AS %s', statement_name, statement_text);
      END IF;
      PERFORM set_config('svc_prepared.' || statement_name, '1', false);
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

CREATE OR REPLACE FUNCTION svc_lock_then_query(lock_class integer, pick_query text, query text, args jsonb)
RETURNS SETOF json LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  pick_name text := 'svc_pick_' || md5(pick_query);
  query_name text := 'svc_query_' || md5(query);
  picked jsonb;
  result json;
  lock_key integer;
BEGIN
  IF coalesce(current_setting('svc_prepared.' || pick_name, true), '') = '' THEN
    IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = pick_name) THEN
      EXECUTE format('PREPARE %I(jsonb) AS %s', pick_name, pick_query);
    END IF;
    PERFORM set_config('svc_prepared.' || pick_name, '1', false);
  END IF;
  EXECUTE format('EXECUTE %I(%L)', pick_name, args) INTO picked;
  RETURN NEXT picked::json;
  IF coalesce(jsonb_array_length(picked -> 'keys'), 0) = 0 THEN
    RETURN;
  END IF;
  FOR lock_key IN SELECT k::integer FROM jsonb_array_elements_text(picked -> 'keys') AS k ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock(lock_class, lock_key);
  END LOOP;
  IF coalesce(current_setting('svc_prepared.' || query_name, true), '') = '' THEN
    IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = query_name) THEN
      EXECUTE format('PREPARE %I(jsonb, jsonb) AS %s', query_name, query);
    END IF;
    PERFORM set_config('svc_prepared.' || query_name, '1', false);
  END IF;
  EXECUTE format('EXECUTE %I(%L, %L)', query_name, args, picked) INTO result;
  RETURN QUERY SELECT json_array_elements(result);
END $$;
