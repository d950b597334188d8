-- Meter reports become leased jobs like runs and deliveries (db/sql/leased-jobs.ts): a reporter
-- takes a due report with a lease before sending it and settles it only while it holds the
-- lease, so two worker processes never send one report at the same time, and a report whose
-- reporter died is due again once its lease expires.
ALTER TABLE meter_reports ADD COLUMN lease_owner text;
ALTER TABLE meter_reports ADD COLUMN lease_expires_at timestamptz;
