-- Each organization's tasks of any status, the UTF-8 bytes of their prompts and their
-- destinations, kept by triggers like active_tasks (0008): the per-organization caps on them
-- are checked on the organization's row, which a task create locks, so they hold exactly
-- under concurrent creates without counting the organization's tasks under that lock.
ALTER TABLE organizations
  ADD COLUMN total_tasks integer NOT NULL DEFAULT 0,
  ADD COLUMN task_prompt_bytes bigint NOT NULL DEFAULT 0,
  ADD COLUMN total_destinations integer NOT NULL DEFAULT 0;

UPDATE organizations o
   SET total_tasks = (SELECT count(*) FROM tasks t WHERE t.organization_id = o.id),
       task_prompt_bytes = (SELECT coalesce(sum(octet_length(t.prompt)), 0) FROM tasks t
                             WHERE t.organization_id = o.id),
       total_destinations = (SELECT count(*) FROM task_destinations d JOIN tasks t ON t.id = d.task_id
                              WHERE t.organization_id = o.id);

CREATE OR REPLACE FUNCTION tasks_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE organizations o SET active_tasks = o.active_tasks + d.active,
                             total_tasks = o.total_tasks + d.n,
                             task_prompt_bytes = o.task_prompt_bytes + d.bytes
    FROM (SELECT organization_id, count(*)::int AS n,
                 (count(*) FILTER (WHERE status = 'active'))::int AS active,
                 sum(octet_length(prompt)) AS bytes
            FROM inserted_tasks GROUP BY organization_id) d
   WHERE o.id = d.organization_id;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION tasks_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Rows of an organization being deleted (cascade) are no longer visible: nothing to update.
  UPDATE organizations o SET active_tasks = o.active_tasks - d.active,
                             total_tasks = o.total_tasks - d.n,
                             task_prompt_bytes = o.task_prompt_bytes - d.bytes
    FROM (SELECT organization_id, count(*)::int AS n,
                 (count(*) FILTER (WHERE status = 'active'))::int AS active,
                 sum(octet_length(prompt)) AS bytes
            FROM deleted_tasks GROUP BY organization_id) d
   WHERE o.id = d.organization_id;
  RETURN NULL;
END $$;

-- Row-level and only when the prompt changes (the WHEN clause costs the frequent scheduler
-- updates nothing).
CREATE FUNCTION tasks_prompt_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE organizations SET task_prompt_bytes = task_prompt_bytes + octet_length(NEW.prompt) - octet_length(OLD.prompt)
   WHERE id = NEW.organization_id;
  RETURN NULL;
END $$;

CREATE TRIGGER tasks_prompt_changed AFTER UPDATE OF prompt ON tasks
  FOR EACH ROW WHEN (OLD.prompt IS DISTINCT FROM NEW.prompt)
  EXECUTE FUNCTION tasks_prompt_changed();

-- Destinations name their task, not its organization. A task's destinations are counted off
-- before the task goes: once it is deleted, the cascade's rows no longer join to it, so the
-- statement trigger below skips them.
CREATE FUNCTION tasks_destinations_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE organizations
     SET total_destinations = total_destinations - (SELECT count(*) FROM task_destinations WHERE task_id = OLD.id)
   WHERE id = OLD.organization_id;
  RETURN OLD;
END $$;

CREATE TRIGGER tasks_destinations_deleted BEFORE DELETE ON tasks
  FOR EACH ROW EXECUTE FUNCTION tasks_destinations_deleted();

CREATE FUNCTION destinations_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE organizations o SET total_destinations = o.total_destinations + d.n
    FROM (SELECT t.organization_id, count(*)::int AS n FROM inserted_destinations x
            JOIN tasks t ON t.id = x.task_id GROUP BY t.organization_id) d
   WHERE o.id = d.organization_id;
  RETURN NULL;
END $$;

CREATE FUNCTION destinations_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE organizations o SET total_destinations = o.total_destinations - d.n
    FROM (SELECT t.organization_id, count(*)::int AS n FROM deleted_destinations x
            JOIN tasks t ON t.id = x.task_id GROUP BY t.organization_id) d
   WHERE o.id = d.organization_id;
  RETURN NULL;
END $$;

CREATE TRIGGER destinations_count_inserted AFTER INSERT ON task_destinations
  REFERENCING NEW TABLE AS inserted_destinations
  FOR EACH STATEMENT EXECUTE FUNCTION destinations_count_inserted();

CREATE TRIGGER destinations_count_deleted AFTER DELETE ON task_destinations
  REFERENCING OLD TABLE AS deleted_destinations
  FOR EACH STATEMENT EXECUTE FUNCTION destinations_count_deleted();
