-- Each organization's number of active tasks, kept by triggers on tasks, so that the tasks
-- limit is checked on the organization's row (which the check locks) instead of by counting
-- the organization's tasks under that lock. A create is then one statement that holds the lock
-- only while it runs and commits, whatever the number of tasks. The triggers cover every
-- writer: the API, the scheduler completing one-off tasks, and operators' own SQL.
ALTER TABLE organizations ADD COLUMN active_tasks integer NOT NULL DEFAULT 0;

UPDATE organizations o
   SET active_tasks = (SELECT count(*) FROM tasks t WHERE t.organization_id = o.id AND t.status = 'active');

-- Statement-level: a bulk insert or delete updates each organization's row once.
CREATE FUNCTION tasks_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE organizations o SET active_tasks = o.active_tasks + d.n
    FROM (SELECT organization_id, count(*)::int AS n FROM inserted_tasks
           WHERE status = 'active' GROUP BY organization_id) d
   WHERE o.id = d.organization_id;
  RETURN NULL;
END $$;

CREATE FUNCTION tasks_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Rows of an organization being deleted (cascade) are no longer visible: nothing to update.
  UPDATE organizations o SET active_tasks = o.active_tasks - d.n
    FROM (SELECT organization_id, count(*)::int AS n FROM deleted_tasks
           WHERE status = 'active' GROUP BY organization_id) d
   WHERE o.id = d.organization_id;
  RETURN NULL;
END $$;

-- Row-level, and only when the status enters or leaves 'active' (the WHEN clause is checked
-- without calling the function), so the scheduler's and workers' frequent task updates pay
-- nothing.
CREATE FUNCTION tasks_count_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE organizations SET active_tasks = active_tasks + CASE WHEN NEW.status = 'active' THEN 1 ELSE -1 END
   WHERE id = NEW.organization_id;
  RETURN NULL;
END $$;

CREATE TRIGGER tasks_count_inserted AFTER INSERT ON tasks
  REFERENCING NEW TABLE AS inserted_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION tasks_count_inserted();

CREATE TRIGGER tasks_count_deleted AFTER DELETE ON tasks
  REFERENCING OLD TABLE AS deleted_tasks
  FOR EACH STATEMENT EXECUTE FUNCTION tasks_count_deleted();

CREATE TRIGGER tasks_count_status_change AFTER UPDATE OF status ON tasks
  FOR EACH ROW WHEN ((OLD.status = 'active') <> (NEW.status = 'active'))
  EXECUTE FUNCTION tasks_count_status_change();
