-- The claim's plans no longer depend on the planner's statistics.
--
-- svc_lock_then_query prepares the claim's two statements (the pick and the claim, run-claim.ts)
-- once per connection and keeps their generic plans until the runs table is analysed again. A
-- plan made while no run was pending (the usual state of a queue: every run done, and
-- autovacuum's ANALYZE has seen it so) found every index over pending runs equally cheap and
-- could read the pending runs through runs_pending_idx (created_at) or runs_task_in_flight_idx
-- (task_id), filtering them by organization: every claim then read the whole backlog that
-- built up later, once per organization. Measured in the peers bench (auto_explain): a claim
-- of 6 runs read 969 runs per organization and took 9.8 ms, its pick 8.9 ms; in
-- test/run-claim-plans.test.ts, a pick read 18,000 runs for a backlog of 2,000.
--
-- 1. runs_pending_idx goes: no statement needs pending runs in order of creation across
--    organizations (the claim takes them per organization, from runs_pending_org_idx), and
--    every run inserted paid an entry in it.
-- 2. runs_task_in_flight_idx names task_id in its predicate, so that only a statement about
--    given tasks' runs (task_id = ...) can use it; the claim's, about organizations, cannot.
-- 3. The claim's function plans, like svc_batch, without sequential scans: every row it reads
--    is reached by a key (a plan made on small tables read all skills and all sources of every
--    organization to find a task's).
DROP INDEX runs_pending_idx;

DROP INDEX runs_task_in_flight_idx;
CREATE INDEX runs_task_in_flight_idx ON runs (task_id)
  WHERE status IN ('pending', 'running') AND task_id IS NOT NULL;

ALTER FUNCTION svc_lock_then_query(integer, text, text, jsonb) SET enable_seqscan = off;
