-- A task's attachments kept on its own row, so that reading a task (or a page of 20) reads no
-- other table: its skill ids and source ids in their order, and its destinations as the API
-- shows them. The link tables (task_skills, task_sources, task_destinations) stay what the
-- runs, the foreign keys and the caps use; these columns are a copy of them, kept by the
-- triggers below at the end of every statement that changes a link (a create, a PATCH that
-- replaces a set, a destination's own routes, and the cascades of deleting a skill or a
-- source), so the copy is exact in every transaction that reads it after its own writes.
ALTER TABLE tasks
  ADD COLUMN skill_ids jsonb NOT NULL DEFAULT '[]',
  ADD COLUMN source_ids jsonb NOT NULL DEFAULT '[]',
  ADD COLUMN destinations jsonb NOT NULL DEFAULT '[]';

-- Recomputes the copies of the given tasks from the link tables. A row is written only when
-- its copy differs: the statement that creates a task writes the copy with the task, and the
-- triggers that follow it then find nothing to change.
CREATE FUNCTION sync_task_links(ids uuid[]) RETURNS void LANGUAGE sql AS $$
  UPDATE tasks t
     SET skill_ids = l.skill_ids, source_ids = l.source_ids, destinations = l.destinations
    FROM (SELECT i.id,
                 coalesce((SELECT jsonb_agg(x.skill_id ORDER BY x.position)
                             FROM task_skills x WHERE x.task_id = i.id), '[]'::jsonb) AS skill_ids,
                 coalesce((SELECT jsonb_agg(x.source_id ORDER BY x.position)
                             FROM task_sources x WHERE x.task_id = i.id), '[]'::jsonb) AS source_ids,
                 coalesce((SELECT jsonb_agg(jsonb_build_object('id', d.id, 'type', d.type, 'value', d.value,
                                                               'label', d.label) ORDER BY d.position)
                             FROM task_destinations d WHERE d.task_id = i.id), '[]'::jsonb) AS destinations
            FROM (SELECT DISTINCT u.id FROM unnest(ids) AS u(id)) i) l
   WHERE t.id = l.id
     AND (t.skill_ids, t.source_ids, t.destinations) IS DISTINCT FROM (l.skill_ids, l.source_ids, l.destinations)
$$;

-- Inserts and deletes: every link table's triggers name their rows `changed_links`. A statement
-- that changed no link (a create of a task without skills) costs no more than the check.
CREATE FUNCTION task_links_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM changed_links) THEN
    PERFORM sync_task_links(ARRAY(SELECT task_id FROM changed_links));
  END IF;
  RETURN NULL;
END $$;

-- Updates: a row's task before and after (a link never moves today; if one did, both tasks).
CREATE FUNCTION task_links_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM sync_task_links(ARRAY(SELECT task_id FROM old_links UNION SELECT task_id FROM new_links));
  RETURN NULL;
END $$;

CREATE TRIGGER task_skills_inserted AFTER INSERT ON task_skills
  REFERENCING NEW TABLE AS changed_links FOR EACH STATEMENT EXECUTE FUNCTION task_links_changed();
CREATE TRIGGER task_skills_deleted AFTER DELETE ON task_skills
  REFERENCING OLD TABLE AS changed_links FOR EACH STATEMENT EXECUTE FUNCTION task_links_changed();
CREATE TRIGGER task_skills_updated AFTER UPDATE ON task_skills
  REFERENCING OLD TABLE AS old_links NEW TABLE AS new_links
  FOR EACH STATEMENT EXECUTE FUNCTION task_links_updated();

CREATE TRIGGER task_sources_inserted AFTER INSERT ON task_sources
  REFERENCING NEW TABLE AS changed_links FOR EACH STATEMENT EXECUTE FUNCTION task_links_changed();
CREATE TRIGGER task_sources_deleted AFTER DELETE ON task_sources
  REFERENCING OLD TABLE AS changed_links FOR EACH STATEMENT EXECUTE FUNCTION task_links_changed();
CREATE TRIGGER task_sources_updated AFTER UPDATE ON task_sources
  REFERENCING OLD TABLE AS old_links NEW TABLE AS new_links
  FOR EACH STATEMENT EXECUTE FUNCTION task_links_updated();

CREATE TRIGGER task_destinations_inserted AFTER INSERT ON task_destinations
  REFERENCING NEW TABLE AS changed_links FOR EACH STATEMENT EXECUTE FUNCTION task_links_changed();
CREATE TRIGGER task_destinations_deleted AFTER DELETE ON task_destinations
  REFERENCING OLD TABLE AS changed_links FOR EACH STATEMENT EXECUTE FUNCTION task_links_changed();
CREATE TRIGGER task_destinations_updated AFTER UPDATE ON task_destinations
  REFERENCING OLD TABLE AS old_links NEW TABLE AS new_links
  FOR EACH STATEMENT EXECUTE FUNCTION task_links_updated();

SELECT sync_task_links(ARRAY(SELECT task_id FROM task_skills
                             UNION SELECT task_id FROM task_sources
                             UNION SELECT task_id FROM task_destinations));
