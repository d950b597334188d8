/**
 * Where a task's deliveries go (a finished run's, and the task's notices): its destinations in
 * order, after the legacy e-mail and SMS flags, each (channel, target) once. `task` is an SQL
 * expression for the task id.
 */
export const deliveryTargets = (task: string) => `
  SELECT DISTINCT ON (channel, lower(target)) destination_id, channel, target, label, position
    FROM (
      SELECT NULL::uuid AS destination_id, 'email' AS channel, t.delivery_email_address AS target,
             NULL::text AS label, -2 AS position
        FROM tasks t WHERE t.id = ${task} AND t.delivery_email AND t.delivery_email_address IS NOT NULL
      UNION ALL
      SELECT NULL::uuid, 'sms', t.delivery_phone_number, NULL::text, -1
        FROM tasks t WHERE t.id = ${task} AND t.delivery_sms AND t.delivery_phone_number IS NOT NULL
      UNION ALL
      SELECT d.id, d.type, d.value, d.label, d.position FROM task_destinations d WHERE d.task_id = ${task}
    ) targets
   ORDER BY channel, lower(target), position`;
