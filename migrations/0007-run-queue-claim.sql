-- The claim query walks the organizations that have pending runs (a loose index scan) and
-- takes at most a few of each one's oldest pending runs, so a claim costs the same whether ten
-- or a hundred thousand runs wait.
CREATE INDEX runs_pending_org_idx ON runs (organization_id, created_at, id) WHERE status = 'pending';
