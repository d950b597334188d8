import type { Queryable } from '../db.ts';

/**
 * What the connector provider last said of a connector source: its toolkit and whether its
 * account is connected. A change also sets isActive to match (and lastConnectedAt when it
 * became connected) and moves updated_at; the same state again writes nothing.
 */
export async function recordConnectorState(
  db: Queryable,
  organizationId: string,
  id: string,
  state: { connected: boolean; toolkit: string; at: Date },
): Promise<void> {
  await db.query(
    `UPDATE sources SET connector_connected = $3, connector_toolkit = $4, is_active = $3,
            last_connected_at = CASE WHEN $3 AND connector_connected IS NOT TRUE THEN $5 ELSE last_connected_at END,
            updated_at = $5
     WHERE organization_id = $1 AND id = $2
       AND (connector_connected IS DISTINCT FROM $3 OR connector_toolkit IS DISTINCT FROM $4 OR is_active <> $3)`,
    [organizationId, id, state.connected, state.toolkit, state.at],
  );
}
