import { CONNECTION_TYPE_SPECS, type Connection, type ConnectionType } from '@xfer/shared';
import type { StoredConnection } from '../../plugins/app/connections/index.js';

/** The one read shape of a connection: credentials reduced to `has_credentials`. */
export function presentConnection(doc: StoredConnection): Connection {
  const type = doc.type as ConnectionType;
  return {
    id: String(doc._id),
    name: doc.name,
    type,
    host: doc.host ?? null,
    port: doc.port ?? CONNECTION_TYPE_SPECS[type].defaultPort,
    path: doc.path,
    options: { ...(doc.options as Record<string, unknown> | undefined) },
    agent_id: doc.agent_id ? String(doc.agent_id) : null,
    agent_pool: doc.agent_pool ?? null,
    has_credentials: doc.credentials != null,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

